package sqldb

import (
	"strings"
	"testing"
)

// FuzzStoreTarget: whatever a store setting holds, CheckTarget and RedactAny answer without
// panicking; a setting CheckTarget refuses never reaches the error with a password-like value
// it carried in key=value form, or as a URL's password.
func FuzzStoreTarget(f *testing.F) {
	for _, s := range []string{"parley.db", "host=db password=hunter2", "host=db password='a b' x=y",
		"mysql://u:hunter2@h/db", "file:x.db?_auth_pass=hunter2", "postgres://u:hunter2@h/db", "postgres://%zz"} {
		f.Add(s, "hunter2")
	}
	f.Fuzz(func(t *testing.T, target, password string) {
		_ = CheckTarget(target)
		_ = RedactAny(target)
		const frame = "host=db dbname=x other://u:@h/db [redacted] password=: neither a postgres:// URL nor a plain file path"
		if len(password) < 4 || strings.ContainsAny(password, " \t\r\n\f\v'\\&@/:=?") || strings.Contains(frame, password) {
			return
		}
		for _, form := range []string{"host=db password=" + password + " dbname=x", "other://u:" + password + "@h/db"} {
			err := CheckTarget(form)
			if err == nil {
				t.Fatalf("CheckTarget(%q) accepted it", form)
			}
			if strings.Contains(err.Error(), password) {
				t.Fatalf("CheckTarget(%q) = %q shows the password", form, err)
			}
		}
	})
}
