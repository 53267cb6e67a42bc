module github.com/aapd/aapd

go 1.26.8
