// Package files owns files: uploads (bytes in the blob store of
// files.storage, metadata in the files table), the one attachment of a
// file to a message, reads decided at the door (file.read), and the sweep
// that deletes orphans and the files of deleted messages. A file's bytes
// are data, never instructions (docs/design/trust.md#files).
package files

import (
	"encoding/hex"
	"path"
	"strings"
	"time"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// ScanStatus is the malware scan state of a file, as stored (the GraphQL
// enum ScanStatus binds to messaging.ScanStatus, which has the same
// values).
type ScanStatus string

// The scan states. Without a scanner every upload is NotScanned; a
// scanner moves Pending to Clean, Infected or Failed.
const (
	ScanPending    ScanStatus = "pending"
	ScanClean      ScanStatus = "clean"
	ScanInfected   ScanStatus = "infected"
	ScanFailed     ScanStatus = "failed"
	ScanNotScanned ScanStatus = "not_scanned"
)

// File is a file's metadata, the one representation of a file.
type File struct {
	ID         string
	UploaderID string
	Name       string
	MIMEType   string
	Size       int64
	SHA256     []byte
	ScanStatus ScanStatus
	// TextStatus is where the extraction of the file's text stands.
	TextStatus TextStatus
	// MessageID is the message the file is attached to; empty before.
	MessageID string
	CreatedAt time.Time
	// storageKey names the bytes in the blob store.
	storageKey string
	// textTruncated reports that the stored text was cut at
	// files.text_max_bytes.
	textTruncated bool
}

// SHA256Hex is the file's digest in lower-case hex, as the API shows it.
func (f File) SHA256Hex() string { return hex.EncodeToString(f.SHA256) }

// Servable reports whether f's bytes may be handed to a reader: never an
// infected file, never one whose scan failed or is still running, and a
// file no scanner saw only when files.require_scan is off.
func (f File) Servable(requireScan bool) bool {
	switch f.ScanStatus {
	case ScanClean:
		return true
	case ScanNotScanned:
		return !requireScan
	default:
		return false
	}
}

// NameMax bounds a cleaned file name (bytes).
const NameMax = 255

// CleanName returns the name a file is stored and shown under: the last
// element of what the client sent (no folders, either separator), NFC,
// without control and format characters (no bidirectional overrides that
// disguise an extension), trimmed, at most NameMax bytes on a rune
// boundary, and "file" when nothing is left. The name is a label: the
// media type is sniffed from the bytes, never taken from it.
func CleanName(raw string) string {
	raw = strings.ReplaceAll(raw, "\\", "/")
	raw = path.Base("/" + raw)
	var b strings.Builder
	for _, r := range norm.NFC.String(raw) {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar {
			continue
		}
		b.WriteRune(r)
	}
	name := strings.TrimSpace(b.String())
	name = strings.Trim(name, ".")
	for len(name) > NameMax {
		_, size := lastRune(name)
		name = name[:len(name)-size]
	}
	name = strings.TrimSpace(name)
	if name == "" || name == "/" {
		return "file"
	}
	return name
}

func lastRune(s string) (rune, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i]&0xC0 != 0x80 {
			return rune(s[i]), len(s) - i
		}
	}
	return 0, len(s)
}
