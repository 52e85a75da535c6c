package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"
)

// decodeAll decodes blocks in order with one decoder (as the target does)
// and returns each block's fields.
func decodeAll(t *testing.T, blocks ...[]byte) [][]hpack.HeaderField {
	t.Helper()
	dec := hpack.NewDecoder(4096, nil)
	dec.SetMaxStringLength(1 << 20)
	var out [][]hpack.HeaderField
	for i, b := range blocks {
		fs, err := dec.DecodeFull(b)
		if err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		out = append(out, fs)
	}
	return out
}

func TestHPACKBombDecodesToRefsTimesTheIndexedEntry(t *testing.T) {
	first := hpackIndexed(hpackGet("/"), "x-b", strings.Repeat("b", bombEntry))
	bomb := hpackBomb(bombRefs)
	got := decodeAll(t, first, bomb, bomb) // the table survives a bomb block
	if len(bomb) > 5000 {
		t.Fatalf("bomb block is %d bytes on the wire, want a few KB", len(bomb))
	}
	for _, fs := range got[1:] {
		var n, size int
		for _, f := range fs {
			if f.Name == "x-b" && len(f.Value) == bombEntry {
				n++
			}
			size += int(f.Size())
		}
		if n != bombRefs {
			t.Fatalf("bomb decodes to %d x-b fields, want %d", n, bombRefs)
		}
		if size < bombRefs*bombEntry {
			t.Fatalf("bomb decodes to %d bytes, want at least %d", size, bombRefs*bombEntry)
		}
	}
	pseudo := map[string]string{}
	for _, f := range got[0] {
		pseudo[f.Name] = f.Value
	}
	if pseudo[":method"] != "GET" || pseudo[":scheme"] != "https" || pseudo[":path"] != "/" || pseudo[":authority"] != "bench.test" {
		t.Fatalf("request head = %v", pseudo)
	}
}

func TestFloodBlockCarriesAbout60KBOfHeadersAndPath(t *testing.T) {
	if b := floodBlock(floodFieldOver); len(b) <= 64<<10 {
		t.Fatalf("the over-limit flood block is %d bytes, want over 64 KiB", len(b))
	}
	b := floodBlock(floodFieldSize)
	if len(b) < floodFields*floodFieldSize || len(b) > 64<<10 {
		t.Fatalf("flood block is %d bytes, want ~%d", len(b), floodFields*floodFieldSize)
	}
	fs := decodeAll(t, b, hpackGet("/big"))
	if n := len(fs[0]); n != 4+floodFields {
		t.Fatalf("flood block has %d fields, want %d", n, 4+floodFields)
	}
	if fs[1][2].Name != ":path" || fs[1][2].Value != "/big" {
		t.Fatalf("GET /big head = %v", fs[1])
	}
}

func TestHPACKIntegerUsesContinuationBytesPastThePrefix(t *testing.T) {
	// RFC 7541 C.1.2: 1337 with a 5-bit prefix.
	if got := hpackInt(nil, 0, 5, 1337); string(got) != "\x1f\x9a\x0a" {
		t.Fatalf("hpackInt(1337, 5) = %x, want 1f9a0a", got)
	}
	if got := hpackInt(nil, 0x80, 7, 62); string(got) != "\xbe" {
		t.Fatalf("indexed 62 = %x, want be", got)
	}
}

func TestAttackJSONHasOneRowPerAttackAndTarget(t *testing.T) {
	path := t.TempDir() + "/a.json"
	rs := []attackResult{{Attack: "rapid reset", Target: "gordon-edge", attackFigures: attackFigures{Bound: "x", Figures: map[string]float64{"cpu_per_wall": 0.5}}, Ratio: 1.2}}
	if err := writeAttackJSON(path, rs, nil); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Results []map[string]any `json:"results"`
	}
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Results) != 1 || out.Results[0]["attack"] != "rapid reset" || out.Results[0]["bound"] != "x" ||
		out.Results[0]["figures"].(map[string]any)["cpu_per_wall"] != 0.5 || out.Results[0]["ratio"] != 1.2 {
		t.Fatalf("json = %s", b)
	}
}
