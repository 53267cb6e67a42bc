package aap

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// The specification does not close a request's shapes: a client may send
// members it does not name, and a server ignores them (aapd's own
// extensions travel that way too). A member that is only a misspelling
// ({"message": "hi"}) then leaves the request without what it meant, and
// its refusal would name only what is missing. So the top-level members a
// request's body had that the request does not know are kept, and a
// refusal of the request names them, with the member meant when one is
// near.

// unknownMembers is the top-level members of a request body that its type
// does not know, in the body's order; nil for almost every body.
type unknownMembers []string

// decodeMembers decodes data, which must be a JSON object, into raw (a
// struct of json.RawMessage fields), and returns the members of data that
// raw has no field for (matched as encoding/json matches them, without
// regard to case). A body without them costs one decoding, as before.
func decodeMembers(data []byte, raw any) (unknownMembers, error) {
	if !isJSONObject(data) {
		return nil, fmt.Errorf("must be of type object, not %s", kindOf(data))
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if dec.Decode(raw) == nil {
		return nil, nil
	}
	// An unknown member (or an error json.Unmarshal reports alike): decode
	// as the protocol wants, ignoring members, then name them.
	if err := json.Unmarshal(data, raw); err != nil {
		return nil, err
	}
	dec = json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	known := memberNames(raw)
	var unknown unknownMembers
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
		if !knownMember(known, name) {
			unknown = append(unknown, name)
		}
	}
	return unknown, nil
}

// memberNames is the JSON names of the exported fields of the struct v
// points to.
func memberNames(v any) []string {
	t := reflect.TypeOf(v).Elem()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		if f := t.Field(i); f.IsExported() {
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
				names = append(names, name)
			}
		}
	}
	return names
}

func knownMember(known []string, name string) bool {
	for _, k := range known {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

// explain adds to a refusal of a request (of the kind what names, whose
// type is of) the members its body had that the request does not know,
// each with the member it may have meant.
func (u unknownMembers) explain(err error, what string, of any) error {
	if err == nil || len(u) == 0 {
		return err
	}
	known := memberNames(of)
	quoted := make([]string, len(u))
	for i, name := range u {
		quoted[i] = fmt.Sprintf("%q", name)
		if meant := nearest(name, known); meant != "" {
			quoted[i] += fmt.Sprintf(" (did you mean %q?)", meant)
		}
	}
	note := fmt.Sprintf("; the body's member %s is not one of %s's, and was ignored", quoted[0], what)
	if len(u) > 1 {
		list := strings.Join(quoted[:len(quoted)-1], ", ") + " and " + quoted[len(quoted)-1]
		note = fmt.Sprintf("; the body's members %s are not %s's, and were ignored", list, what)
	}
	if e, ok := err.(*Error); ok {
		return &Error{Field: e.Field, Msg: e.Msg + note}
	}
	return fmt.Errorf("%w%s", err, note)
}

// nearest is the known name a misspelt one most likely meant: within two
// edits (message → messages, strem → stream), or "".
func nearest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
