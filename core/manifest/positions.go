package manifest

import (
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// position is a 1-based line and column in the source.
type position struct{ Line, Column int }

// keyIndex maps canonical dotted keys ("services.web.http[0].port") to the
// position where the key (or array element) appears in the source. It is
// built by scanning the document with go-toml's unstable parser; it is
// best-effort: on a syntax error it holds what was indexed before it.
type keyIndex struct {
	pos   map[string]position
	byPos map[position]string
	// tables holds the keys written as a [table] header or an inline table,
	// to refuse [services.x.http] where [[services.x.http]] is meant.
	tables map[string]bool
}

// indexKeys scans data and records the position of every key, table header,
// array-of-tables element and array element. It never panics.
func indexKeys(data []byte) (idx *keyIndex) {
	idx = &keyIndex{pos: map[string]position{}, byPos: map[position]string{}, tables: map[string]bool{}}
	defer func() {
		// Best-effort: a parser panic keeps what was indexed so far.
		_ = recover()
	}()
	var p unstable.Parser
	p.Reset(data)
	arrays := map[string]int{} // canonical array-of-tables path -> element count
	current := ""
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			canon := ""
			it := e.Key()
			for it.Next() {
				n := it.Node()
				canon = joinKey(canon, string(n.Data))
				at := idx.nodePos(&p, n)
				if it.IsLast() && e.Kind == unstable.ArrayTable {
					idx.add(canon, at)
					count := arrays[canon]
					arrays[canon] = count + 1
					canon = canon + "[" + strconv.Itoa(count) + "]"
				} else if count, ok := arrays[canon]; ok && count > 0 {
					canon = canon + "[" + strconv.Itoa(count-1) + "]"
				}
				idx.add(canon, at)
			}
			if e.Kind == unstable.Table {
				idx.tables[canon] = true
			}
			current = canon
		case unstable.KeyValue:
			idx.keyValue(&p, current, e)
		}
	}
	return idx
}

// keyValue records a (possibly dotted) key and, recursively, the keys of its
// inline-table and array value.
func (idx *keyIndex) keyValue(p *unstable.Parser, prefix string, kv *unstable.Node) {
	canon := prefix
	var at position
	it := kv.Key()
	for it.Next() {
		n := it.Node()
		canon = joinKey(canon, string(n.Data))
		at = idx.nodePos(p, n)
		idx.add(canon, at)
	}
	idx.value(p, canon, at, kv.Value())
}

// value records the keys inside an inline table or the elements of an array.
func (idx *keyIndex) value(p *unstable.Parser, canon string, at position, v *unstable.Node) {
	if v == nil {
		return
	}
	switch v.Kind {
	case unstable.InlineTable:
		idx.tables[canon] = true
		it := v.Children()
		for it.Next() {
			if c := it.Node(); c.Kind == unstable.KeyValue {
				idx.keyValue(p, canon, c)
			}
		}
	case unstable.Array:
		i := 0
		it := v.Children()
		for it.Next() {
			c := it.Node()
			if c.Kind == unstable.Comment {
				continue
			}
			elem := canon + "[" + strconv.Itoa(i) + "]"
			epos := at
			if c.Raw.Length > 0 {
				epos = idx.nodePos(p, c)
			}
			idx.add(elem, epos)
			idx.value(p, elem, epos, c)
			i++
		}
	}
}

// nodePos is the start position of n in the source.
func (idx *keyIndex) nodePos(p *unstable.Parser, n *unstable.Node) position {
	s := p.Shape(n.Raw)
	return position{Line: s.Start.Line, Column: s.Start.Column}
}

// add records the first position seen for key.
func (idx *keyIndex) add(key string, at position) {
	if _, ok := idx.pos[key]; ok {
		return
	}
	idx.pos[key] = at
	if _, ok := idx.byPos[at]; !ok {
		idx.byPos[at] = key
	}
}

// lookup returns the position of key, else of its nearest indexed parent
// (so a missing required key points at its table), else the zero position.
func (idx *keyIndex) lookup(key string) position {
	for key != "" {
		if at, ok := idx.pos[key]; ok {
			return at
		}
		key = parentKey(key)
	}
	return position{}
}

// keyAt returns the canonical key recorded at a position, if any.
func (idx *keyIndex) keyAt(line, col int) (string, bool) {
	k, ok := idx.byPos[position{Line: line, Column: col}]
	return k, ok
}

// joinKey appends one key part to a dotted prefix.
func joinKey(prefix, part string) string {
	if prefix == "" {
		return part
	}
	return prefix + "." + part
}

// parentKey strips the last ".part" or "[i]" from a canonical key.
func parentKey(key string) string {
	if strings.HasSuffix(key, "]") {
		if i := strings.LastIndexByte(key, '['); i >= 0 {
			return key[:i]
		}
	}
	if i := strings.LastIndexByte(key, '.'); i >= 0 {
		return key[:i]
	}
	return ""
}
