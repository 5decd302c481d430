// Package splitter is the algorithm of the "split" example operator: it
// splits a text into words and produces one record per word, keyed by the
// word, with the value {"word":"<word>"}.
//
// It is pure Go with no SDK import so that the very same code runs inside
// the Wasm guest (udfs/split/go) and natively (tests, benchmarks against the
// guests). udfs/split/c/split.c is the same algorithm in C, written to
// mirror this file; change both together.
//
// Configuration (JSON):
//
//	{"field": "text", "lowercase": true}
//
// With "field", the text is that top-level string member of a JSON object
// value, unescaped; a value that is not a valid object, or lacks the member,
// or whose member is not a string, produces nothing. Without "field" the
// whole value is the text. Words are maximal runs of ASCII letters and
// digits: every other byte, including every byte of a multi-byte UTF-8
// character, separates words. With "lowercase", ASCII letters are lowered.
package splitter

import (
	"errors"
	"fmt"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

// Splitter applies one configuration. It keeps scratch space between calls
// to Split, so it is not safe for concurrent use: use one per task.
type Splitter struct {
	field     []byte // unescaped member name; nil: the whole value is the text
	lowercase bool

	text  []byte // scratch: the unescaped member
	word  []byte // scratch: the lowered word
	value []byte // scratch: the output value
}

// Parse reads a configuration. Its error messages are the ones the C
// version reports too.
func Parse(config []byte) (*Splitter, error) {
	s := &Splitter{}
	it, ok := jsonscan.Objects(config)
	if !ok {
		return nil, errors.New("split: config is not a JSON object")
	}
	seenField, seenLower := false, false
	for {
		key, value, st := it.Next()
		if st == jsonscan.Malformed {
			return nil, errors.New("split: config is not valid JSON")
		}
		if st == jsonscan.End {
			return s, nil
		}
		switch {
		case jsonscan.Equal(key, []byte("field")) && !seenField:
			seenField = true
			if jsonscan.KindOf(value) != jsonscan.String {
				return nil, errors.New("split: config: field must be a string")
			}
			// Keep the name non-nil even when empty: nil means "no field".
			s.field = jsonscan.AppendUnquote(make([]byte, 0, len(value)), value)
		case jsonscan.Equal(key, []byte("lowercase")) && !seenLower:
			seenLower = true
			switch jsonscan.KindOf(value) {
			case jsonscan.True:
				s.lowercase = true
			case jsonscan.False:
				s.lowercase = false
			default:
				return nil, errors.New("split: config: lowercase must be true or false")
			}
		default:
			return nil, fmt.Errorf("split: config: unknown or repeated key %s", key)
		}
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Split calls emit once per word of value, in order, with the output key
// (the word) and value ({"word":"<word>"}). Both slices are valid only
// during the call. value is untrusted: any bytes are handled without
// panicking.
func (s *Splitter) Split(value []byte, emit func(key, value []byte)) {
	text := value
	if s.field != nil {
		v, st := jsonscan.Lookup(value, s.field)
		if st != jsonscan.Field || jsonscan.KindOf(v) != jsonscan.String {
			return
		}
		s.text = jsonscan.AppendUnquote(s.text[:0], v)
		text = s.text
	}
	i := 0
	for {
		for i < len(text) && !isWordByte(text[i]) {
			i++
		}
		start := i
		for i < len(text) && isWordByte(text[i]) {
			i++
		}
		if i == start {
			return
		}
		word := text[start:i]
		if s.lowercase {
			s.word = s.word[:0]
			for _, c := range word {
				if c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				s.word = append(s.word, c)
			}
			word = s.word
		}
		s.value = append(s.value[:0], `{"word":"`...)
		s.value = append(s.value, word...)
		s.value = append(s.value, `"}`...)
		emit(word, s.value)
	}
}
