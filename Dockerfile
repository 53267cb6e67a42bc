# syntax=docker/dockerfile:1
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# .git stays out of the build context: say which version this is instead
# (docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) .)
ARG VERSION=""
ARG REVISION=""
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION} -X main.revision=${REVISION}" -o /out/aapd ./cmd/aapd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/aapd /usr/local/bin/aapd
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/aapd"]
CMD ["serve"]
