package connectors

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/eddy-stream/eddy/dataflow/stream"
)

// jsonField returns the raw text of the top-level member name of the JSON
// object in data. ok is false when data is not an object or has no such
// member; as in encoding/json, the last of duplicate members wins.
//
// data must be valid JSON (the caller checks it once with json.Valid); on
// anything else jsonField returns false rather than panicking. It exists so
// that reading one field of a line does not decode the whole line into a
// map.
func jsonField(data []byte, name string) (raw []byte, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return nil, false
	}
	for i < len(data) {
		keyStart := i
		i = skipString(data, i)
		if i < 0 {
			return nil, false
		}
		key := data[keyStart:i]
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ':' {
			return nil, false
		}
		i = skipSpace(data, i+1)
		valueStart := i
		i = skipValue(data, i)
		if i < 0 {
			return nil, false
		}
		if keyEquals(key, name) {
			raw, ok = data[valueStart:i], true
		}
		i = skipSpace(data, i)
		if i >= len(data) || data[i] != ',' {
			break // '}'
		}
		i = skipSpace(data, i+1)
	}
	return raw, ok
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at data[i], or -1.
func skipString(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

// skipValue returns the index after the value starting at data[i], or -1.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				if i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	default: // number, true, false, null
		for i < len(data) {
			switch data[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i
			}
			i++
		}
		return i
	}
}

// keyEquals compares a quoted JSON member name with name. Escapes and
// non-ASCII bytes go through encoding/json so that "\u0074s" matches "ts"
// and invalid UTF-8 is treated as encoding/json treats it.
func keyEquals(quoted []byte, name string) bool {
	body := quoted[1 : len(quoted)-1]
	simple := true
	for _, c := range body {
		if c == '\\' || c >= 0x80 {
			simple = false
			break
		}
	}
	if simple {
		return string(body) == name
	}
	var s string
	return json.Unmarshal(quoted, &s) == nil && s == name
}

// jsonKey turns the raw value of a key field into a record key: the
// content of a string, the JSON text of anything else, nothing for null.
func jsonKey(raw []byte) ([]byte, error) {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil, nil
	case raw[0] == '"':
		return unquote(raw)
	default:
		return raw, nil
	}
}

// jsonTimestamp reads event time from the raw value of a timestamp field:
// a number of milliseconds since the Unix epoch or an RFC 3339 string.
// null means no timestamp.
func jsonTimestamp(raw []byte) (int64, error) {
	switch {
	case string(raw) == "null":
		return stream.NoTimestamp, nil
	case raw[0] == '"':
		s, err := unquote(raw)
		if err != nil {
			return 0, err
		}
		t, err := time.Parse(time.RFC3339Nano, string(s))
		if err != nil {
			return 0, fmt.Errorf("timestamp %s is not an RFC 3339 time", raw)
		}
		return t.UnixMilli(), nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		if ms, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return ms, nil
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || f < -(1<<63) || f >= 1<<63 {
			return 0, fmt.Errorf("timestamp %s is out of range", raw)
		}
		return int64(f), nil
	default:
		return 0, fmt.Errorf("timestamp %s is neither a number of milliseconds nor an RFC 3339 string", raw)
	}
}

func unquote(raw []byte) ([]byte, error) {
	body := raw[1 : len(raw)-1]
	for _, c := range body {
		if c == '\\' || c >= 0x80 {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, err
			}
			return []byte(s), nil
		}
	}
	return body, nil
}
