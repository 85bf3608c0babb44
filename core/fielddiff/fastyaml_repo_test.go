package fielddiff

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestFastReaderOnRepository checks the fast reader against yaml.v3 on every distinct document of
// every .yaml, .yml and .json blob in a repository's history that the ledger would parse: each
// document of a stream as ParseCached reads it (the distinct ones: a new version of install.yaml
// shares most of its documents with the last), and each file of one document as Parse reads it.
// It reports how much took the fast path:
//
//	PARLEY_EQUIV_REPO=/path/to/repo.git go test ./core/fielddiff -run TestFastReaderOnRepository -v
func TestFastReaderOnRepository(t *testing.T) {
	repo := os.Getenv("PARLEY_EQUIV_REPO")
	if repo == "" {
		t.Skip("PARLEY_EQUIV_REPO is not set")
	}
	blobs := manifestBlobs(t, repo)
	type declined struct {
		path  string
		bytes int
	}
	var fastDocs, allDocs, fastBytes, allBytes int
	var declines []declined
	seen := map[[sha256.Size]byte]bool{}
	readBlobs(t, repo, blobs, func(path string, content []byte) {
		if !mayHoldObjects(content) {
			return
		}
		docs := splitDocuments(content)
		if len(docs) < 2 {
			docs = [][]byte{content}
		}
		for _, d := range docs {
			sum := sha256.Sum256(d)
			if seen[sum] {
				continue
			}
			seen[sum] = true
			allDocs++
			allBytes += len(d)
			if checkFastMatchesV3(t, path, d) {
				fastDocs++
				fastBytes += len(d)
			} else {
				declines = append(declines, declined{path, len(d)})
			}
		}
	})
	t.Logf("%s: %d blobs; distinct documents: %d of %d fast (%.1f%%); bytes: %d of %d fast (%.1f%%)", repo, len(blobs),
		fastDocs, allDocs, 100*float64(fastDocs)/float64(max(allDocs, 1)), fastBytes, allBytes, 100*float64(fastBytes)/float64(max(allBytes, 1)))
	slices.SortFunc(declines, func(a, b declined) int { return cmp.Compare(b.bytes, a.bytes) })
	for _, d := range declines[:min(len(declines), 15)] {
		t.Logf("declined: %s (%d bytes)", d.path, d.bytes)
	}
}

// manifestBlobs lists each distinct blob of a supported YAML or JSON path, with one of its paths.
func manifestBlobs(t *testing.T, repo string) map[string]string {
	out, err := exec.Command("git", "--git-dir", repo, "rev-list", "--objects", "--missing=allow-any", "--all").Output()
	if err != nil {
		t.Fatal(err)
	}
	blobs := map[string]string{}
	for line := range strings.Lines(string(out)) {
		sha, path, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if ok && kindOf(path) == "yaml" {
			blobs[sha] = path
		}
	}
	return blobs
}

func readBlobs(t *testing.T, repo string, blobs map[string]string, each func(path string, content []byte)) {
	cmd := exec.Command("git", "--git-dir", repo, "cat-file", "--batch")
	var in bytes.Buffer
	for sha := range blobs {
		fmt.Fprintln(&in, sha)
	}
	cmd.Stdin = &in
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReaderSize(stdout, 1<<20)
	for {
		header, err := r.ReadString('\n')
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(header)
		if len(f) == 2 && f[1] == "missing" { // a clone without some blobs
			continue
		}
		if len(f) != 3 {
			t.Fatalf("git cat-file: %q", header)
		}
		size, _ := strconv.Atoi(f[2])
		content := make([]byte, size+1)
		if _, err := io.ReadFull(r, content); err != nil {
			t.Fatal(err)
		}
		if f[1] == "blob" {
			each(blobs[f[0]], content[:size])
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}
