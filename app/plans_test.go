package app

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/parleyhq/parley/internal/schematest"
)

func postPlan(t *testing.T, srv *httptest.Server, token, query string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+PlansPath+query, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, []byte(b.String())
}

// POST /v1/plans judges a Terraform plan as the token's identity: the Kafka agent's plan for 24
// consumers is refused by the bound Terraform declares, 12 passes; the answer is the same document
// parley review --plan --json prints.
func TestPlansAPIJudgesAPlanAsTheTokensIdentity(t *testing.T) {
	_, h, _, token := proposalsSetup(t)
	srv := httptest.NewServer(&Plans{Proposals: h})
	defer srv.Close()
	read := func(name string) []byte {
		b, err := os.ReadFile("../reconcile/tfplan/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, c := range []struct {
		plan, conclusion string
	}{{"kafka-scale-24.json", "failure"}, {"kafka-scale-12.json", "success"}} {
		code, body := postPlan(t, srv, token, "?module_dir=infra/kafka&intent=performance", read(c.plan))
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.plan, code, body)
		}
		schematest.Validate(t, "plan-review.schema.json", body)
		var doc struct {
			Conclusion string
			Author     struct{ Source, ID string }
		}
		if err := json.Unmarshal(body, &doc); err != nil || doc.Conclusion != c.conclusion || doc.Author.ID != agentARN {
			t.Fatalf("%s: %v %+v\n%s", c.plan, err, doc, body)
		}
	}
	for _, c := range []struct {
		name, token, query string
		body               []byte
		code               int
		want               string
	}{
		{"no token", "", "", read("kafka-scale-12.json"), 401, "Bearer"},
		{"malformed plan", token, "", read("malformed.json"), 422, "plan"},
		{"a state, not a plan", token, "", read("state.json"), 422, "plan"},
		{"unknown parameter", token, "?module=x", read("kafka-scale-12.json"), 400, "module"},
		{"escaping module dir", token, "?module_dir=../x", read("kafka-scale-12.json"), 400, "module_dir"},
		{"bad motivation", token, "?motivation=%20", read("kafka-scale-12.json"), 400, "motivation"},
		{"unknown repository", token, "?repository=acme/nowhere", read("kafka-scale-12.json"), 404, "acme/nowhere"},
	} {
		code, body := postPlan(t, srv, c.token, c.query, c.body)
		if code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("%s: %d %s, want %d containing %q", c.name, code, body, c.code, c.want)
		}
	}
}
