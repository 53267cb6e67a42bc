package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"

	"github.com/aapd/aapd/aap"
)

// maxExpression bounds the expressions the calculator reads.
const maxExpression = 1000

// Calculator returns the "calculator" tool: exact-as-float64 arithmetic on
// an expression with + - * / % ^, parentheses and sqrt(...).
func Calculator() Func {
	return Func{
		ToolSpec: aap.ToolSpec{
			Name:        "calculator",
			Title:       "Calculator",
			Description: "Evaluates an arithmetic expression with + - * / % ^, parentheses and sqrt(x), e.g. (2+3)*4^2.",
			Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string",` +
				`"description":"The expression to evaluate"}},"required":["expression"]}`),
		},
		Fn: func(_ context.Context, input json.RawMessage) (aap.Content, error) {
			var in struct {
				Expression string `json:"expression"`
			}
			if err := decodeInput(input, &in); err != nil {
				return aap.Content{}, err
			}
			v, err := Evaluate(in.Expression)
			if err != nil {
				return aap.Content{}, err
			}
			return aap.TextContent(strconv.FormatFloat(v, 'g', -1, 64)), nil
		},
	}
}

// Evaluate computes an arithmetic expression.
func Evaluate(expr string) (float64, error) {
	if strings.TrimSpace(expr) == "" {
		return 0, errors.New("empty expression")
	}
	if len(expr) > maxExpression {
		return 0, fmt.Errorf("expression longer than %d characters", maxExpression)
	}
	p := &parser{src: expr}
	v, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	p.skipSpace()
	if p.pos < len(p.src) {
		return 0, fmt.Errorf("unexpected %q at position %d", p.src[p.pos], p.pos+1)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errors.New("the result is not a finite number")
	}
	return v, nil
}

// parser is a recursive-descent evaluator; depth guards against stack
// exhaustion from deeply nested input.
type parser struct {
	src string
	pos int
}

const maxDepth = 100

func (p *parser) skipSpace() {
	for p.pos < len(p.src) && unicode.IsSpace(rune(p.src[p.pos])) {
		p.pos++
	}
}

func (p *parser) peek() byte {
	p.skipSpace()
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// expr := term (('+' | '-') term)*
func (p *parser) expr(depth int) (float64, error) {
	if depth > maxDepth {
		return 0, errors.New("expression nested too deeply")
	}
	v, err := p.term(depth)
	for err == nil {
		op := p.peek()
		if op != '+' && op != '-' {
			break
		}
		p.pos++
		var r float64
		if r, err = p.term(depth); op == '+' {
			v += r
		} else {
			v -= r
		}
	}
	return v, err
}

// term := unary (('*' | '/' | '%') unary)*
func (p *parser) term(depth int) (float64, error) {
	v, err := p.unary(depth)
	for err == nil {
		op := p.peek()
		if op != '*' && op != '/' && op != '%' {
			break
		}
		p.pos++
		var r float64
		if r, err = p.unary(depth); err != nil {
			break
		}
		switch {
		case op == '*':
			v *= r
		case r == 0:
			return 0, errors.New("division by zero")
		case op == '/':
			v /= r
		default:
			v = math.Mod(v, r)
		}
	}
	return v, err
}

// unary := ('-' | '+') unary | power — so that -2^2 is -(2^2), as in
// mathematics.
func (p *parser) unary(depth int) (float64, error) {
	if depth > maxDepth {
		return 0, errors.New("expression nested too deeply")
	}
	switch p.peek() {
	case '-':
		p.pos++
		v, err := p.unary(depth + 1)
		return -v, err
	case '+':
		p.pos++
		return p.unary(depth + 1)
	}
	return p.power(depth)
}

// power := primary ('^' unary)?, right-associative: 2^3^2 is 2^9.
func (p *parser) power(depth int) (float64, error) {
	v, err := p.primary(depth)
	if err != nil || p.peek() != '^' {
		return v, err
	}
	p.pos++
	e, err := p.unary(depth + 1)
	return math.Pow(v, e), err
}

// primary := number | '(' expr ')' | 'sqrt' '(' expr ')'
func (p *parser) primary(depth int) (float64, error) {
	c := p.peek()
	switch {
	case c == '(':
		p.pos++
		v, err := p.expr(depth + 1)
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, fmt.Errorf("missing ')' at position %d", p.pos+1)
		}
		p.pos++
		return v, nil
	case strings.HasPrefix(p.src[p.pos:], "sqrt"):
		p.pos += len("sqrt")
		if p.peek() != '(' {
			return 0, errors.New("sqrt needs parentheses: sqrt(x)")
		}
		v, err := p.primary(depth + 1)
		if err == nil && v < 0 {
			err = errors.New("sqrt of a negative number")
		}
		return math.Sqrt(v), err
	case c >= '0' && c <= '9' || c == '.':
		start := p.pos
		for p.pos < len(p.src) && (p.src[p.pos] >= '0' && p.src[p.pos] <= '9' || p.src[p.pos] == '.') {
			p.pos++
		}
		v, err := strconv.ParseFloat(p.src[start:p.pos], 64)
		if err != nil {
			return 0, fmt.Errorf("bad number %q", p.src[start:p.pos])
		}
		return v, nil
	case c == 0:
		return 0, errors.New("unexpected end of expression")
	}
	return 0, fmt.Errorf("unexpected %q at position %d", c, p.pos+1)
}
