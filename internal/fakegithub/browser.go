package fakegithub

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
)

// The registration form of Parley's /setup page: where it posts, and the App manifest it posts.
var (
	formAction   = regexp.MustCompile(`<form id="register" action="([^"]+)" method="post">`)
	formManifest = regexp.MustCompile(`name="manifest" value="([^"]+)"`)
)

// RegisterThroughSetup does what a user's browser does with Parley's /setup address: open it,
// submit its registration form (the App manifest) to GitHub, here the fake, and follow GitHub's
// redirect back to /setup with its code. It returns the last answer's status and body; an error
// is a page that could not be fetched or holds no registration form.
func RegisterThroughSetup(client *http.Client, setupURL string) (int, string, error) {
	resp, err := client.Get(setupURL)
	if err != nil {
		return 0, "", err
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	a, m := formAction.FindSubmatch(page), formManifest.FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || a == nil || m == nil {
		return 0, "", fmt.Errorf("GET %s: %d, no registration form:\n%s", setupURL, resp.StatusCode, page)
	}
	resp, err = client.PostForm(html.UnescapeString(string(a[1])), url.Values{"manifest": {html.UnescapeString(string(m[1]))}})
	if err != nil {
		return 0, "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(body), nil
}
