package app

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/parleyhq/parley/internal/version"
)

// lockedBuffer is a log sink the server's goroutines and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Which build answers is on /metrics (parley_build_info) and in the start log line, so a graph or a
// bug report can name the version that produced it.
func TestServeSaysWhichBuildItIs(t *testing.T) {
	_, _, pemKey := fakeApp(t)
	logs := &lockedBuffer{}
	_, base, stop := runServeLogged(t, "", map[string]string{"PARLEY_APP_ID": "99", "PARLEY_PRIVATE_KEY": string(pemKey),
		"PARLEY_WEBHOOK_SECRETS": "hook", "PARLEY_STORE": filepath.Join(t.TempDir(), "parley.db"), "PARLEY_LISTEN": "127.0.0.1:0"},
		slog.New(slog.NewJSONHandler(logs, nil)))
	info := version.Get()

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := `parley_build_info{goversion="` + info.GoVersion + `",revision="` + info.ShortRevision() + `",version="` + info.Version + `"} 1`
	if !strings.Contains(string(body), want) {
		t.Fatalf("/metrics lacks %s:\n%s", want, body)
	}

	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var start map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"msg":"parley serving"`) {
			if err := json.Unmarshal([]byte(line), &start); err != nil {
				t.Fatal(err)
			}
		}
	}
	if start == nil {
		t.Fatalf("no start line in the log:\n%s", logs.String())
	}
	if start["version"] != info.Version || start["revision"] != info.ShortRevision() || start["goversion"] != info.GoVersion {
		t.Fatalf("start line %v does not name the build %+v", start, info)
	}
}
