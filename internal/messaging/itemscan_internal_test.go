package messaging

import (
	"testing"
	"time"
)

// TestItemScan: a scanned row comes out with its own values whatever its
// repeated columns share: the window's thread, a known origin and kind
// as the package's constants, anything else copied as it is.
func TestItemScan(t *testing.T) {
	t.Parallel()
	const window = "01a22f15-66c5-7d35-8dc6-1e991ea5bc89"
	const other = "01a22f15-66f5-7933-ba69-ffd341a2ff69"
	cases := []struct {
		name                 string
		thread, origin, kind string
		want                 ContextItem
	}{
		{"window thread, known words", window, "human", "text", ContextItem{ThreadID: window, Origin: OriginHuman, Kind: KindText}},
		{"other thread", other, "agent", "card", ContextItem{ThreadID: other, Origin: OriginAgent, Kind: KindCard}},
		{"every origin", window, "system", "system", ContextItem{ThreadID: window, Origin: OriginSystem, Kind: KindSystem}},
		{"import and voice", window, "import", "voice", ContextItem{ThreadID: window, Origin: OriginImport, Kind: KindVoice}},
		{"app and run", window, "app", "run", ContextItem{ThreadID: window, Origin: OriginApp, Kind: KindRun}},
		{"unknown words are copied", window, "martian", "hologram", ContextItem{ThreadID: window, Origin: "martian", Kind: "hologram"}},
		{"prefix is not a word", window, "hum", "tex", ContextItem{ThreadID: window, Origin: "hum", Kind: "tex"}},
	}
	at := time.Date(2026, 12, 1, 1, 0, 0, 0, time.FixedZone("x", 3600))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s itemScan
			s.x = ContextItem{ID: "m", ThreadSeq: 7, CreatedAt: at}
			s.thread, s.origin, s.kind = []byte(tc.thread), []byte(tc.origin), []byte(tc.kind)
			got := s.item(window)
			// The driver reuses its bytes for the next row: the item must
			// not share them.
			copy(s.thread, "xxxxxxxx")
			copy(s.origin, "xxx")
			copy(s.kind, "xxx")
			tc.want.ID, tc.want.ThreadSeq, tc.want.CreatedAt = "m", 7, at.UTC()
			if got != tc.want || got.CreatedAt.Location() != time.UTC {
				t.Errorf("item %+v, want %+v", got, tc.want)
			}
		})
	}
}
