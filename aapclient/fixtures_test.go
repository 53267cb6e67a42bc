package aapclient

import "github.com/aapd/aapd/aap"

var (
	createEcho = aap.CreateSessionRequest{Agent: aap.AgentConfig{Name: "echo"}}
	turnHi     = aap.TurnRequest{Messages: []aap.Message{aap.UserMessage("hi")}}
)
