package webhooks

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	const value = "hunter2-very-secret"
	s := mustSecret(t, value)
	type wrapper struct {
		Name   string
		Secret Secret
		Ptr    *Secret
	}
	w := wrapper{Name: "github", Secret: s, Ptr: &s}

	var outputs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10.3s"} {
		outputs = append(outputs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, w), fmt.Sprintf(verb, []Secret{s}))
	}
	outputs = append(outputs, fmt.Sprint(s), fmt.Sprintln(s, &s), s.String(), s.GoString())

	var logBuf bytes.Buffer
	for _, h := range []slog.Handler{slog.NewJSONHandler(&logBuf, nil), slog.NewTextHandler(&logBuf, nil)} {
		slog.New(h).Info("config", "secret", s, "wrapper", w, slog.Any("ptr", &s))
	}
	outputs = append(outputs, logBuf.String())

	js, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	outputs = append(outputs, string(js))

	hexValue := fmt.Sprintf("%x", value)
	for _, out := range outputs {
		if strings.Contains(out, value) || strings.Contains(out, hexValue) || strings.Contains(out, "104 117 110") {
			t.Errorf("secret leaked: %s", out)
		}
		if !strings.Contains(out, redacted) {
			t.Errorf("output does not say it redacted: %s", out)
		}
	}
}

func TestNewSecretRefusesEmpty(t *testing.T) {
	if _, err := NewSecret(""); err == nil {
		t.Fatal("NewSecret(\"\") succeeded")
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"zen":"Keep it logically awesome."}`)
	oldS, newS, other := mustSecret(t, "old"), mustSecret(t, "new"), mustSecret(t, "other")
	cases := []struct {
		name    string
		secrets []Secret
		sig     string
		want    bool
	}{
		{"signed with the only secret", []Secret{newS}, Sign(newS, body), true},
		{"signed with the old of two", []Secret{newS, oldS}, Sign(oldS, body), true},
		{"signed with the new of two", []Secret{newS, oldS}, Sign(newS, body), true},
		{"signed with an unknown secret", []Secret{newS, oldS}, Sign(other, body), false},
		{"no secrets", nil, Sign(newS, body), false},
		{"zero secret is skipped", []Secret{{}}, "sha256=" + strings.Repeat("0", 64), false},
	}
	for _, tc := range cases {
		mac, err := parseSignature(tc.sig)
		if err != nil {
			t.Fatalf("%s: parse: %v", tc.name, err)
		}
		m := newMACs(sha256.New, tc.secrets)
		for _, w := range m.writers() {
			w.Write(body)
		}
		if got := slices.Contains(m.match(mac), true); got != tc.want {
			t.Errorf("%s: verify = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseSignature(t *testing.T) {
	cases := []struct {
		header string
		want   error
	}{
		{"", errSignatureMissing},
		{"sha1=" + strings.Repeat("ab", 20), errSignatureMalformed},
		{"sha256=", errSignatureMalformed},
		{"sha256=" + strings.Repeat("zz", 32), errSignatureMalformed},
		{"sha256=" + strings.Repeat("ab", 31), errSignatureMalformed},
		{"SHA256=" + strings.Repeat("ab", 32), errSignatureMalformed},
		{"sha256=" + strings.Repeat("aB", 32), nil},
	}
	for _, tc := range cases {
		_, err := parseSignature(tc.header)
		if err != tc.want {
			t.Errorf("parseSignature(%q) err = %v, want %v", tc.header, err, tc.want)
		}
	}
}
