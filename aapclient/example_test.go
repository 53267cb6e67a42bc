package aapclient_test

import (
	"context"
	"fmt"
	"log"

	"github.com/aapd/aapd/aap"
	"github.com/aapd/aapd/aapclient"
)

// Create a session and stream a turn's answer as it is written. The same
// code talks to any AAP v3 server; the echo agent is aapd's built-in one.
func Example() {
	baseURL, apiKey, stop := exampleServer() // a real aapd, started for the example
	defer stop()
	ctx := context.Background()

	c, err := aapclient.New(baseURL, aapclient.WithAPIKey(apiKey))
	if err != nil {
		log.Fatal(err)
	}
	sess, err := c.CreateSession(ctx, aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: "echo"}})
	if err != nil {
		log.Fatal(err)
	}
	stream, err := c.StreamTurn(ctx, sess.SessionID, aap.TurnRequest{
		Stream:   aap.StreamDelta,
		Messages: []aap.Message{aap.UserMessage("Hello, agent")},
	})
	if err != nil {
		log.Fatal(err)
	}
	for ev, err := range stream.Events() {
		if err != nil {
			log.Fatal(err) // the stream could not be resumed, or ctx ended
		}
		switch ev.Type {
		case aap.EventTextDelta:
			fmt.Print(ev.Delta)
		case aap.EventTurnStop:
			fmt.Println("\nstop:", ev.StopReason)
		}
	}
	// Output:
	// Echo: Hello, agent
	// stop: end_turn
}
