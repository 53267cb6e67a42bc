package admin

import (
	"net/http"
	"time"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/httpapi"
	"github.com/aapd/aapd/transfer"
)

// The endpoints: each reads its request, calls one Service operation, and
// writes its result. Everything else is the Service's.

func (h *Handler) createTenant(w http.ResponseWriter, r *http.Request) error {
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(w, r, &body); err != nil {
		return err
	}
	t, err := h.svc.CreateTenant(r.Context(), body.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/tenants/"+t.Name)
	return writeJSON(w, http.StatusCreated, t)
}

func (h *Handler) listTenants(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := h.svc.ListTenants(r.Context(), cursor, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

func (h *Handler) getTenant(w http.ResponseWriter, r *http.Request) error {
	t, err := h.svc.GetTenant(r.Context(), mux.Vars(r)["name"])
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, t)
}

func (h *Handler) deleteTenant(w http.ResponseWriter, r *http.Request) error {
	if err := h.svc.DeleteTenant(r.Context(), mux.Vars(r)["name"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) createKey(w http.ResponseWriter, r *http.Request) error {
	// expiresAt is read as text, so that a bad time is refused naming it.
	var body struct {
		Scopes    []string `json:"scopes"`
		ExpiresAt *string  `json:"expiresAt"`
		Label     string   `json:"label"`
	}
	if err := decode(w, r, &body); err != nil {
		return err
	}
	req := KeyRequest{Scopes: body.Scopes, Label: body.Label}
	if body.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339, *body.ExpiresAt)
		if err != nil {
			return invalid("expiresAt", "%q is not an RFC 3339 time (2025-01-31T00:00:00Z)", *body.ExpiresAt)
		}
		req.ExpiresAt = &t
	}
	k, err := h.svc.CreateKey(r.Context(), mux.Vars(r)["name"], req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, k)
}

func (h *Handler) listKeys(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := h.svc.ListKeys(r.Context(), mux.Vars(r)["name"], cursor, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

func (h *Handler) revokeKey(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	if _, err := h.svc.RevokeKey(r.Context(), v["name"], v["id"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) addIssuer(w http.ResponseWriter, r *http.Request) error {
	var req IssuerRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	i, err := h.svc.AddIssuer(r.Context(), mux.Vars(r)["name"], req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, i)
}

func (h *Handler) listIssuers(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := h.svc.ListIssuers(r.Context(), mux.Vars(r)["name"], cursor, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

func (h *Handler) removeIssuer(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	if err := h.svc.RemoveIssuer(r.Context(), v["name"], v["id"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) getLimits(w http.ResponseWriter, r *http.Request) error {
	t, err := h.svc.GetTenant(r.Context(), mux.Vars(r)["name"])
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, t.Limits)
}

func (h *Handler) setLimits(w http.ResponseWriter, r *http.Request) error {
	var l Limits
	if err := decode(w, r, &l); err != nil {
		return err
	}
	got, err := h.svc.SetLimits(r.Context(), mux.Vars(r)["name"], l)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, got)
}

func (h *Handler) getRetention(w http.ResponseWriter, r *http.Request) error {
	got, err := h.svc.GetRetention(r.Context(), mux.Vars(r)["name"])
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, got)
}

func (h *Handler) setRetention(w http.ResponseWriter, r *http.Request) error {
	var req RetentionRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	got, err := h.svc.SetRetention(r.Context(), mux.Vars(r)["name"], req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, got)
}

func (h *Handler) usage(w http.ResponseWriter, r *http.Request) error {
	q, err := httpapi.Query(r)
	if err != nil {
		return err
	}
	u, err := h.svc.Usage(r.Context(), mux.Vars(r)["name"], q.Get("from"), q.Get("to"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, u)
}

func (h *Handler) createWebhook(w http.ResponseWriter, r *http.Request) error {
	var req WebhookRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	name := mux.Vars(r)["name"]
	wh, err := h.svc.CreateWebhook(r.Context(), name, req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", Prefix+"/tenants/"+name+"/webhooks/"+wh.ID)
	return writeJSON(w, http.StatusCreated, wh)
}

func (h *Handler) listWebhooks(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	page, err := h.svc.ListWebhooks(r.Context(), mux.Vars(r)["name"], cursor, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

func (h *Handler) getWebhook(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	wh, err := h.svc.GetWebhook(r.Context(), v["name"], v["id"])
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wh)
}

func (h *Handler) deleteWebhook(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	if err := h.svc.DeleteWebhook(r.Context(), v["name"], v["id"]); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *Handler) rotateWebhookSecret(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	wh, err := h.svc.RotateWebhookSecret(r.Context(), v["name"], v["id"])
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wh)
}

func (h *Handler) enableWebhook(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	wh, err := h.svc.EnableWebhook(r.Context(), v["name"], v["id"])
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, wh)
}

func (h *Handler) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	cursor, limit, err := pageParams(r)
	if err != nil {
		return err
	}
	v := mux.Vars(r)
	page, err := h.svc.ListDeliveries(r.Context(), v["name"], v["id"], cursor, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, page)
}

func (h *Handler) redeliver(w http.ResponseWriter, r *http.Request) error {
	v := mux.Vars(r)
	d, err := h.svc.Redeliver(r.Context(), v["name"], v["id"], v["eventId"])
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, d)
}

func (h *Handler) eraseOwner(w http.ResponseWriter, r *http.Request) error {
	tenant, owner := mux.Vars(r)["name"], mux.Vars(r)["sub"]
	e, err := h.svc.EraseOwner(r.Context(), tenant, owner)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, e)
}

// exportOwner streams the end user's document. Once it has begun, a
// failure can no longer be a problem: the connection is cut, and the
// document, without its trailer, is refused by every reader.
func (h *Handler) exportOwner(w http.ResponseWriter, r *http.Request) error {
	tenant, owner := mux.Vars(r)["name"], mux.Vars(r)["sub"]
	out := &httpapi.LazyWriter{W: w, Start: func() {
		w.Header().Set("Content-Type", transfer.ContentType)
		w.Header().Set("Content-Disposition", `attachment; filename="owner.jsonl"`)
		w.WriteHeader(http.StatusOK)
	}}
	_, err := h.svc.ExportOwner(r.Context(), tenant, owner, out, nil)
	if err == nil || !out.Started {
		return err
	}
	h.log.ErrorContext(r.Context(), "export of an end user cut short", "tenant", tenant, "err", err)
	panic(http.ErrAbortHandler)
}
