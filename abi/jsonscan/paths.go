package jsonscan

// Paths finds the values of a fixed set of member paths in JSON objects in
// one validating pass (ABI version 6's field extraction, abi.Fields): the
// same rules as an Iter walk that enters the objects on the paths and
// scans every other value, without the iterator's state machine.
type Paths struct {
	root []pathNode
	n    int
}

// pathNode is one key of the trie of paths.
type pathNode struct {
	name     []byte
	plain    bool // name has no quote, backslash or control byte
	path     int  // the index of the path that ends here, or -1
	children []pathNode
}

// MaxPaths is the most paths a Paths holds (the members met at one level
// are kept in a 64-bit set).
const MaxPaths = 64

// NewPaths returns the finder of paths, each a list of member names
// (unescaped) from the top-level object down; paths[j]'s span is pair j of
// the spans Find fills. It panics with more than MaxPaths paths or an
// empty one: the caller checks its input.
func NewPaths(paths [][]string) *Paths {
	if len(paths) > MaxPaths {
		panic("jsonscan: more than MaxPaths paths")
	}
	p := &Paths{n: len(paths)}
	for j, path := range paths {
		if len(path) == 0 {
			panic("jsonscan: an empty path")
		}
		p.root = insertPath(p.root, path, j)
	}
	return p
}

func insertPath(nodes []pathNode, path []string, j int) []pathNode {
	i := -1
	for k := range nodes {
		if string(nodes[k].name) == path[0] {
			i = k
		}
	}
	if i < 0 {
		nodes = append(nodes, pathNode{name: []byte(path[0]), plain: plainName(path[0]), path: -1})
		i = len(nodes) - 1
	}
	if len(path) == 1 {
		nodes[i].path = j
	} else {
		nodes[i].children = insertPath(nodes[i].children, path[1:], j)
	}
	return nodes
}

func plainName(name string) bool {
	for i := range len(name) {
		if c := name[i]; c == '"' || c == '\\' || c < 0x20 {
			return false
		}
	}
	return true
}

// Find reports whether v is one valid JSON object (optionally surrounded
// by whitespace) and sets spans[2j], spans[2j+1] to the offset in v and
// the length of path j's raw value: at each level the first member of the
// name (compared after unescaping); through a value that is not an object,
// or without the member, the path is absent: offset -1, length 0. spans
// must have 2 × len(paths) elements; when v is not valid every path is
// absent.
func (p *Paths) Find(v []byte, spans []int) bool {
	spans = spans[:2*p.n]
	for j := range p.n {
		spans[2*j], spans[2*j+1] = -1, 0
	}
	i := skipSpace(v, 0)
	if i < len(v) && v[i] == '{' {
		if end := p.object(v, i, p.root, spans); end >= 0 && skipSpace(v, end) == len(v) {
			return true
		}
	}
	for j := range p.n {
		spans[2*j], spans[2*j+1] = -1, 0
	}
	return false
}

// object scans the object whose '{' is at b[i], recording the spans of
// nodes' paths, and returns the index after its '}', or -1 if it is not
// valid. The recursion is at most as deep as the longest path.
func (p *Paths) object(b []byte, i int, nodes []pathNode, spans []int) int {
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	var seen uint64 // bit k: nodes[k]'s member was met
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		keyEnd := stringEnd(b, i)
		if keyEnd < 0 {
			return -1
		}
		// The raw key's content is never shorter than its unescaped name,
		// and of the same length only without escapes: a plain name of
		// that length matches exactly when the bytes do.
		c := b[i+1 : keyEnd-1]
		var n *pathNode
		for k := range nodes {
			m := &nodes[k]
			if seen&(1<<k) != 0 || len(c) < len(m.name) {
				continue
			}
			if len(c) == len(m.name) && m.plain {
				if string(c) != string(m.name) {
					continue
				}
			} else if !Equal(b[i:keyEnd], m.name) {
				continue
			}
			n = m
			seen |= 1 << k
			break
		}
		i = skipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return -1
		}
		i = skipSpace(b, i+1)
		end := -1
		if i < len(b) {
			// Strings and numbers, most values, without ValueEnd's
			// container stack.
			switch c := b[i]; {
			case c == '"':
				end = stringEnd(b, i)
			case c == '-' || isDigit(c):
				end = numberEnd(b, i)
			case c == '{' && n != nil && n.children != nil:
				end = p.object(b, i, n.children, spans)
			default:
				end = ValueEnd(b, i)
			}
		}
		if end < 0 {
			return -1
		}
		if n != nil && n.path >= 0 {
			spans[2*n.path], spans[2*n.path+1] = i, end-i
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return -1
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1
		default:
			return -1
		}
	}
}
