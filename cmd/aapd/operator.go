package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/aapd/aapd/httpapi/admin"
	"github.com/aapd/aapd/store"
)

// adminToken reads the operator token: from the file named by
// --admin-token-file, or from $AAPD_ADMIN_TOKEN; "" when neither is set.
// The token itself has no flag, so that it never shows in a process list.
// A token that is empty or too short refuses the start: an operator who
// meant to open the admin API must not get a server with a guessable one.
func adminToken(file string) (string, error) {
	env, inEnv := os.LookupEnv("AAPD_ADMIN_TOKEN")
	switch {
	case file != "" && inEnv && env != "":
		return "", &usageError{"set the operator token in $AAPD_ADMIN_TOKEN or --admin-token-file, not both"}
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", &usageError{fmt.Sprintf("--admin-token-file: %v", err)}
		}
		token := strings.TrimSpace(string(b))
		if token == "" {
			return "", &usageError{fmt.Sprintf("--admin-token-file: %s is empty", file)}
		}
		if err := admin.CheckToken(token); err != nil {
			return "", &usageError{fmt.Sprintf("--admin-token-file: %v", err)}
		}
		return token, nil
	case inEnv && env != "":
		token := strings.TrimSpace(env)
		if err := admin.CheckToken(token); err != nil {
			return "", &usageError{fmt.Sprintf("$AAPD_ADMIN_TOKEN: %v", err)}
		}
		return token, nil
	}
	return "", nil
}

// adminHandler is the operator's API, or nil when no operator token is
// configured. Its changes reach this process's caches at once (Notify),
// before the database's notification tells the other processes.
func (m *Main) adminHandler() (http.Handler, error) {
	if m.cfg.AdminToken == "" {
		return nil, nil
	}
	svc := admin.NewService(admin.Config{
		Store: m.Store, Logger: m.log, Actor: "admin-api",
		Notify:              func(n store.Notification) { m.API.Notify(n) },
		WebhookAllowPrivate: m.cfg.WebhookAllowPrivate,
		Retention:           m.cfg.Retention,
	})
	h, err := admin.NewHandler(svc, m.cfg.AdminToken)
	if err != nil {
		return nil, err
	}
	m.log.Info("admin API enabled", "prefix", admin.Prefix)
	return h, nil
}
