// Command mcpserver serves mcptest's tools over stdio, for the tests of
// package mcp. With -fail it writes to stderr and exits at once.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/aapd/aapd/agents/mcp/mcptest"
)

func main() {
	fail := flag.Bool("fail", false, "exit at once with an error on stderr")
	flag.Parse()
	if *fail {
		fmt.Fprintln(os.Stderr, "mcpserver: missing configuration file /etc/nowhere.conf")
		os.Exit(1)
	}
	if err := mcptest.NewServer().Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
