package agents

import (
	"net/http"
	"sync"
)

// providerIdleConns is how many idle connections to one model provider's
// host a process keeps for reuse: about as many as the turns it runs at
// once, which call the same host.
const providerIdleConns = 256

// ProviderHTTPClient is the HTTP client model providers call through when
// their configuration names none. Go's default transport keeps two idle
// connections per host: with more turns than that calling one provider at
// once, every call past the second would dial (and, for https, handshake)
// anew and leave the connection to be closed. This client keeps as many as
// a busy process uses. It is shared, so that every agent on one provider
// shares its connections.
func ProviderHTTPClient() *http.Client { return providerClient() }

var providerClient = sync.OnceValue(func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 4 * providerIdleConns
	t.MaxIdleConnsPerHost = providerIdleConns
	return &http.Client{Transport: t}
})
