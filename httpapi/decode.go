package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/gorilla/mux"

	"github.com/aapd/aapd/logctx"
	"github.com/aapd/aapd/store"
)

// readBody reads the request body, at most MaxBodyBytes of it, within
// BodyTimeout (limitBodyTime): too big is a 413, too slow a 408.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var (
			tooBig *http.MaxBytesError
			slow   *bodyTimeoutError
		)
		if errors.As(err, &tooBig) || errors.As(err, &slow) {
			return nil, err
		}
		return nil, probInvalid.with("could not read the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, probInvalid.with("the request body is empty; send a JSON object")
	}
	return body, nil
}

// decodeJSON decodes a JSON body into v. Whatever the Content-Type, the
// body is read as JSON (curl's -d sends a form type by default).
func decodeJSON(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		p := probInvalid.with("%s", describeJSONError(body, err))
		p.Field = fieldOf(p.Detail)
		return p
	}
	return nil
}

// pathSegment is one step of the JSON path a decoding error starts with
// ("messages[2]: content[1]: ..."): a name, an index, or both.
var pathSegment = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_.]*)?(?:\[\d+\])*$`)

// fieldOf returns the JSON path a decoding error names, joined as the
// validation errors name theirs (messages[2].content[1]), or "".
func fieldOf(detail string) string {
	var path string
	for {
		seg, rest, ok := strings.Cut(detail, ": ")
		if !ok || seg == "" || !pathSegment.MatchString(seg) || strings.HasPrefix(seg, "line ") {
			return path
		}
		if path != "" && !strings.HasPrefix(seg, "[") {
			path += "."
		}
		path += seg
		detail = rest
	}
}

// describeJSONError turns a decoding error into a sentence for the client.
func describeJSONError(body []byte, err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line, col := position(body, syntax.Offset)
		return fmt.Sprintf("malformed JSON at line %d, column %d: %s", line, col, syntax.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Sprintf("the body must be a JSON object, not %s", typ.Value)
		}
		return fmt.Sprintf("%s: must be of type %s, not %s", field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: "):
		return "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")
	}
	return err.Error()
}

func position(body []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := int64(0); i < offset-1 && i < int64(len(body)); i++ {
		if body[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

// sessionID returns the {id} of the route; ids this server never issues are
// not looked up.
func sessionID(r *http.Request) (string, error) {
	id := mux.Vars(r)["id"]
	if !store.ValidID("sess_", id) {
		return "", probNotFound.with("no such session")
	}
	logctx.FromContext(r.Context()).SetSession(id)
	return id, nil
}
