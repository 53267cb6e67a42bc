package httpapi

import "net/http"

// LazyWriter starts a streamed response (its head, by Start) with its first
// byte, so that a failure before any byte is still a proper problem
// response, and one after it is known to have cut the stream (Started).
type LazyWriter struct {
	W       http.ResponseWriter
	Start   func()
	Started bool
}

func (l *LazyWriter) Write(p []byte) (int, error) {
	if !l.Started {
		l.Started = true
		l.Start()
	}
	return l.W.Write(p)
}
