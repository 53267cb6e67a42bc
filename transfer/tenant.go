package transfer

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/aapd/aapd/store"
)

// TenantSource is what a tenant document is written from: *store.Store.
type TenantSource interface {
	Exporter
	SessionList(ctx context.Context, p store.SessionListParams) (store.SessionPage, error)
}

// WriteTenant writes a tenant's document to out: the tenant line (t), the
// document of every session of tenantID, and the tenant trailer. Each
// session is read as one state of it; sessions created while the document
// is written may be missing from it (stop the tenant's traffic to move it
// whole). done, when set, is called after each session.
func WriteTenant(ctx context.Context, out io.Writer, src TenantSource, tenantID string, t Tenant, opts WriteOptions, done func(sessionID string)) (int64, error) {
	return writeTenant(ctx, out, src, store.SessionListParams{TenantID: tenantID}, t, opts, done)
}

// WriteOwner writes the tenant document of one end user's sessions: t
// (which the caller fills with what the user may see of the tenant), the
// document of every session of tenantID that owner owns, and the tenant
// trailer. aapd tenants import reads it as any tenant document.
func WriteOwner(ctx context.Context, out io.Writer, src TenantSource, tenantID, owner string, t Tenant, opts WriteOptions, done func(sessionID string)) (int64, error) {
	if owner == "" {
		return 0, errors.New("write the document of an end user: no owner given")
	}
	return writeTenant(ctx, out, src, store.SessionListParams{TenantID: tenantID, Owner: owner}, t, opts, done)
}

// writeTenant writes a tenant document of the sessions list lists.
func writeTenant(ctx context.Context, out io.Writer, src TenantSource, list store.SessionListParams, t Tenant, opts WriteOptions, done func(sessionID string)) (int64, error) {
	bw := bufio.NewWriterSize(out, 64<<10)
	hw := &hashingWriter{w: bw, h: sha256.New()}
	line, err := json.Marshal(TenantLine{Type: typeTenant, Format: TenantFormat, Version: TenantVersion, Tenant: t})
	if err != nil {
		return 0, err
	}
	if _, err := hw.Write(append(line, '\n')); err != nil {
		return 0, err
	}
	var n int64
	for after := ""; ; {
		list.After, list.Limit = after, 100
		page, err := src.SessionList(ctx, list)
		if err != nil {
			return n, err
		}
		for _, s := range page.Sessions {
			if _, err := WriteSession(ctx, hw, src, store.SessionExportParams{TenantID: list.TenantID, SessionID: s.ID}, opts); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					continue // deleted since it was listed
				}
				return n, fmt.Errorf("session %s: %w", s.ID, err)
			}
			n++
			if done != nil {
				done(s.ID)
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	trailer, err := json.Marshal(TenantTrailer{Type: typeTenantTrailer, Sessions: n, SHA256: hex.EncodeToString(hw.h.Sum(nil))})
	if err != nil {
		return n, err
	}
	if _, err := bw.Write(append(trailer, '\n')); err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// hashingWriter writes to w and hashes what it writes.
type hashingWriter struct {
	w io.Writer
	h hash.Hash
}

func (hw *hashingWriter) Write(p []byte) (int, error) {
	hw.h.Write(p)
	return hw.w.Write(p)
}

// TenantImporter creates what a tenant document holds.
type TenantImporter interface {
	Importer
	// CreateTenant creates the tenant, its limits and issuers, and returns
	// its id: also with an error, once the tenant itself was created.
	CreateTenant(ctx context.Context, t Tenant) (string, error)
}

// ReadTenant reads a tenant document from r: it creates the tenant, then
// imports each session, each in a transaction of its own, keeping its
// owner and its id and its turns'; it returns the tenant's id and the sessions imported. A broken
// line is a *LineError. On an error, whatever was created stays: the
// caller removes the tenant (admin.Service.ImportTenant does).
func ReadTenant(ctx context.Context, r io.Reader, dst TenantImporter, opts ReadOptions) (tenantID string, sessions int64, err error) {
	lr := newLineReader(r, opts.MaxLine)
	line, err := lr.next()
	if errors.Is(err, io.EOF) {
		return "", 0, &LineError{Line: 1, Rule: RuleFormat, Msg: "the document is empty"}
	}
	if err != nil {
		return "", 0, err
	}
	h := sha256.New()
	lr.push(h)
	typ, err := lineType(line)
	if err != nil {
		return "", 0, lr.errAt(RuleJSON, "%v", err)
	}
	if typ != typeTenant {
		return "", 0, lr.errAt(RuleFormat, "the document starts with a %q line, not a %s line", typ, TenantFormat)
	}
	var tl TenantLine
	if err := decodeLine(line, &tl); err != nil {
		return "", 0, lr.errAt(RuleJSON, "%v", err)
	}
	switch {
	case tl.Format != TenantFormat:
		return "", 0, lr.errAt(RuleFormat, "format %q is not %q", tl.Format, TenantFormat)
	case tl.Version < 1 || tl.Version > TenantVersion:
		return "", 0, lr.errAt(RuleFormat, "version %d is unknown to this server, which reads versions 1 to %d", tl.Version, TenantVersion)
	}
	if tenantID, err = dst.CreateTenant(ctx, tl.Tenant); err != nil {
		return tenantID, 0, err // the tenant, if it was created before the error
	}
	opts.TenantID, opts.OwnerFromDocument, opts.KeepIDs = tenantID, true, true
	for {
		line, err := lr.next()
		if errors.Is(err, io.EOF) {
			return tenantID, sessions, &LineError{Line: lr.n + 1, Rule: RuleTrailer, Msg: "the document ends without its tenant trailer: it was cut"}
		}
		if err != nil {
			return tenantID, sessions, err
		}
		typ, err := lineType(line)
		if err != nil {
			return tenantID, sessions, lr.errAt(RuleJSON, "%v", err)
		}
		switch typ {
		case typeHeader:
			if _, err := readSessionDoc(ctx, lr, line, dst, opts, false); err != nil {
				return tenantID, sessions, err
			}
			sessions++
			continue
		case typeTenantTrailer:
		default:
			return tenantID, sessions, lr.errAt(RuleOrder, "a %q line where a session's header or the tenant trailer comes", typ)
		}
		var tt TenantTrailer
		if err := decodeLine(line, &tt); err != nil {
			return tenantID, sessions, lr.errAt(RuleJSON, "%v", err)
		}
		sum := hex.EncodeToString(h.Sum(nil))
		switch {
		case tt.Sessions != sessions:
			return tenantID, sessions, lr.errAt(RuleTrailer, "the tenant trailer counts %d sessions, the document holds %d", tt.Sessions, sessions)
		case !strings.EqualFold(tt.SHA256, sum):
			return tenantID, sessions, lr.errAt(RuleTrailer, "the SHA-256 of the lines before the tenant trailer is %s, not %s: the document was changed", sum, tt.SHA256)
		}
		if _, err := lr.next(); !errors.Is(err, io.EOF) {
			if err != nil {
				return tenantID, sessions, err
			}
			return tenantID, sessions, lr.errAt(RuleTrailer, "a line after the tenant trailer")
		}
		return tenantID, sessions, nil
	}
}
