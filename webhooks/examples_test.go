package webhooks

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/parleyhq/parley/internal/npmdata"
	"github.com/parleyhq/parley/webhooks/store"
)

// TestGitHubExamplePayloads delivers every example payload GitHub publishes
// (@octokit/webhooks-examples) to a real receiver and store: signed correctly it is stored once, a
// redelivery with the same delivery ID does nothing, and a wrong or missing signature is refused.
// The events Parley handles must also decode into go-github's types.
func TestGitHubExamplePayloads(t *testing.T) {
	examples, err := npmdata.WebhookExamples()
	if err != nil {
		npmdata.FatalOrSkip(t, err) // skipped if npm is needed to fetch the examples and is not installed
	}
	if len(examples) < 300 {
		t.Fatalf("only %d examples", len(examples))
	}
	st := openStore(t, store.Options{})
	secret := mustSecret(t, "it's a secret to everybody")
	wrong := mustSecret(t, "not the secret")
	rcv, err := NewReceiver(ReceiverConfig{Store: st, Secrets: []Secret{secret}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	post := func(event, id string, body []byte, sig string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+GitHubPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderEvent, event)
		req.Header.Set(HeaderDelivery, id)
		if sig != "" {
			req.Header.Set(HeaderSignature, sig)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	handled := map[string]bool{"pull_request": true, "issue_comment": true, "check_run": true, "check_suite": true,
		"push": true, "installation": true, "installation_repositories": true}
	decoded := map[string]int{}
	seen := map[string]bool{}
	for i, ex := range examples {
		id := fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)
		if code := post(ex.Event, id, ex.Payload, Sign(wrong, ex.Payload)); code != http.StatusUnauthorized {
			t.Fatalf("%s example %d with a wrong signature: %d, want 401", ex.Event, i, code)
		}
		if code := post(ex.Event, id, ex.Payload, ""); code != http.StatusUnauthorized {
			t.Fatalf("%s example %d without a signature: %d, want 401", ex.Event, i, code)
		}
		// A few examples are byte for byte another's: stored once, under the first ID.
		want := http.StatusAccepted
		if seen[string(ex.Payload)] {
			want = http.StatusOK
		}
		seen[string(ex.Payload)] = true
		if code := post(ex.Event, id, ex.Payload, Sign(secret, ex.Payload)); code != want {
			t.Fatalf("%s example %d: %d, want %d", ex.Event, i, code, want)
		}
		if code := post(ex.Event, id, ex.Payload, Sign(secret, ex.Payload)); code != http.StatusOK {
			t.Fatalf("%s example %d redelivered: %d, want 200 (duplicate)", ex.Event, i, code)
		}
		if handled[ex.Event] {
			if _, err := github.ParseWebHook(ex.Event, ex.Payload); err != nil && !goGitHubCannotDecode(ex.Event, ex.Payload) {
				t.Errorf("%s example %d does not decode into go-github v60 types: %v", ex.Event, i, err)
			}
			decoded[ex.Event]++
		}
	}
	stats, err := st.Stats(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Pending != len(seen) {
		t.Errorf("store holds %d pending deliveries, want exactly one per distinct example body (%d)", stats.Pending, len(seen))
	}
	for ev := range handled {
		if decoded[ev] == 0 {
			t.Errorf("no example payload for %s", ev)
		}
	}
	t.Logf("%d example payloads of %d events; decoded %v", len(examples), 58, decoded)
}

// goGitHubCannotDecode names the example payloads go-github v60 itself cannot decode: two check_run
// examples carry timestamps such as "2018-04-25 20:42:10" (no T, no zone), which github.Timestamp
// refuses. Parley's check_run handler must not depend on those fields; the list is exact, so a new
// decoding failure still fails the test.
func goGitHubCannotDecode(event string, payload []byte) bool {
	return event == "check_run" && bytes.Contains(payload, []byte(`"2018-04-25 20:42:10"`))
}
