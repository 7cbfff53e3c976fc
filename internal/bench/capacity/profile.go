package capacity

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"
)

// fetchProfile takes a CPU profile of d from the server's metrics
// listener (metrics.pprof), keeps it in dir and returns it.
func fetchProfile(ctx context.Context, pprofURL string, d time.Duration, dir string) (*profile.Profile, string, error) {
	secs := max(1, int(d.Seconds()))
	url := strings.TrimRight(pprofURL, "/") + fmt.Sprintf("/debug/pprof/profile?seconds=%d", secs)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	resp, err := (&http.Client{Timeout: d + 30*time.Second}).Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("%s answered %d (is metrics.pprof on?)", url, resp.StatusCode)
	}
	p, err := profile.Parse(bytes.NewReader(b))
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(dir, fmt.Sprintf("bothy-capacity-%d.pprof", time.Now().Unix()))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		path = ""
	}
	return p, path, nil
}

// shares is the flat CPU of a profile by package and by function, the n
// largest of each, in percent of all samples.
func shares(p *profile.Profile, n int) (packages, functions []Share) {
	byPkg, byFn := map[string]int64{}, map[string]int64{}
	var total int64
	vi := len(p.SampleType) - 1 // cpu nanoseconds, after the sample count
	for _, s := range p.Sample {
		v := s.Value[vi]
		total += v
		if len(s.Location) == 0 || len(s.Location[0].Line) == 0 || s.Location[0].Line[0].Function == nil {
			continue
		}
		fn := s.Location[0].Line[0].Function.Name
		byFn[fn] += v
		byPkg[PackageOf(fn)] += v
	}
	return top(byPkg, total, n), top(byFn, total, n)
}

// top is the n largest entries of m in percent of total.
func top(m map[string]int64, total int64, n int) []Share {
	if total == 0 {
		return nil
	}
	out := make([]Share, 0, len(m))
	for k, v := range m {
		out = append(out, Share{Name: k, Percent: 100 * float64(v) / float64(total)})
	}
	slices.SortFunc(out, func(a, b Share) int {
		if c := cmp.Compare(b.Percent, a.Percent); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out[:min(n, len(out))]
}

// PackageOf is the import path of a function's symbol name:
// "github.com/jackc/pgx/v5/pgconn.(*PgConn).Exec" is
// "github.com/jackc/pgx/v5/pgconn", "runtime.mallocgc" is "runtime".
func PackageOf(fn string) string {
	slash := strings.LastIndexByte(fn, '/')
	rest := fn[slash+1:]
	if dot := strings.IndexByte(rest, '.'); dot >= 0 {
		return fn[:slash+1+dot]
	}
	return fn
}
