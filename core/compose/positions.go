package compose

import (
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v4"
)

// location is where a key is written: file, 1-based line and column.
type location struct {
	File   string
	Line   int
	Column int
}

// fileIndex maps the key paths of one compose file
// ("services.web.ports[0]", "services.web.deploy.update_config.order") to
// the position of the key (or sequence element) in that file.
type fileIndex struct {
	file  string
	pos   map[string]location
	items []item
	// visits counts walked nodes, bounded by maxVisits (aliases can make a
	// small document expand exponentially).
	visits int
}

// maxVisits bounds the nodes indexFile walks per file.
const maxVisits = 200000

// item is one scalar element of a sequence ("KEY=value" of a list-form
// environment or labels), for locating an entry by its content.
type item struct {
	list  string
	value string
	at    location
}

// positions locates keys across the compose files of a project: the last
// file (in -f order) that writes a key is where its effective value comes
// from, as compose merges later files over earlier ones.
type positions struct {
	files []*fileIndex
}

// indexFile parses data as YAML and records the position of every mapping
// key and sequence element. A file that does not parse yields an empty
// index (compose-go reports the syntax error itself).
func indexFile(file string, data []byte) *fileIndex {
	idx := &fileIndex{file: file, pos: map[string]location{}}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return idx
	}
	if len(doc.Content) > 0 {
		idx.walk("", doc.Content[0], 0)
	}
	return idx
}

// walk records the keys below n, whose own path is path. Aliases and merge
// keys ("<<: *base") are followed, bounded in depth.
func (idx *fileIndex) walk(path string, n *yaml.Node, depth int) {
	if n == nil || depth > 64 || idx.visits >= maxVisits {
		return
	}
	idx.visits++
	switch n.Kind {
	case yaml.AliasNode:
		idx.walk(path, n.Alias, depth+1)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				if v.Kind == yaml.SequenceNode {
					for _, c := range v.Content {
						idx.walk(path, c, depth+1)
					}
				} else {
					idx.walk(path, v, depth+1)
				}
				continue
			}
			p := joinPath(path, k.Value)
			idx.add(p, k)
			idx.walk(p, v, depth+1)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := path + "[" + strconv.Itoa(i) + "]"
			idx.add(p, c)
			if c.Kind == yaml.ScalarNode {
				idx.items = append(idx.items, item{list: path, value: c.Value, at: location{File: idx.file, Line: c.Line, Column: c.Column}})
			}
			idx.walk(p, c, depth+1)
		}
	}
}

func (idx *fileIndex) add(path string, n *yaml.Node) {
	if _, ok := idx.pos[path]; !ok {
		idx.pos[path] = location{File: idx.file, Line: n.Line, Column: n.Column}
	}
}

// has reports whether the file writes the key path.
func (idx *fileIndex) has(path string) bool {
	_, ok := idx.pos[path]
	return ok
}

// locate returns the location of path in the last file that writes it;
// failing that, of its nearest parent written anywhere (a key brought in by
// extends or include points at its service). The zero location when nothing
// matches.
func (ps *positions) locate(path string) location {
	for p := path; p != ""; p = parentPath(p) {
		for i := len(ps.files) - 1; i >= 0; i-- {
			if at, ok := ps.files[i].pos[p]; ok {
				return at
			}
		}
	}
	return location{}
}

// locateItem returns the location of the element of the sequence at list
// whose value starts with prefix (last file first); else locate(list).
func (ps *positions) locateItem(list, prefix string) location {
	for i := len(ps.files) - 1; i >= 0; i-- {
		for _, it := range ps.files[i].items {
			if it.list == list && strings.HasPrefix(it.value, prefix) {
				return it.at
			}
		}
	}
	return ps.locate(list)
}

func joinPath(prefix, part string) string {
	if prefix == "" {
		return part
	}
	return prefix + "." + part
}

// parentPath strips the last ".part" or "[i]".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndexByte(p, '['); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// has reports whether any file writes the key path.
func (ps *positions) has(path string) bool {
	for _, f := range ps.files {
		if f.has(path) {
			return true
		}
	}
	return false
}

// locateEntry locates the entry name of the sequence or mapping at list:
// the key list.name (mapping form), else the element of the sequence equal
// to name or starting with name+":" (short form "SOURCE:TARGET", last file
// first), else list itself. It returns the key path it located.
func (ps *positions) locateEntry(list, name string) (string, location) {
	if key := list + "." + name; ps.has(key) {
		return key, ps.locate(key)
	}
	for i := len(ps.files) - 1; i >= 0; i-- {
		for _, it := range ps.files[i].items {
			if it.list == list && (it.value == name || strings.HasPrefix(it.value, name+":")) {
				return list, it.at
			}
		}
	}
	return list, ps.locate(list)
}

// names are the indexed files' display names, in merge order.
func (ps *positions) names() []string {
	out := make([]string, len(ps.files))
	for i, f := range ps.files {
		out[i] = f.file
	}
	return out
}
