package readme_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocumentedTestsExist: every test or benchmark that README.md or a
// page of docs/ names in backquotes is a function of some _test.go file
// of the repository, so a renamed test cannot leave a promise pointing
// at nothing.
func TestDocumentedTestsExist(t *testing.T) {
	defined := map[string]bool{}
	funcName := regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)[A-Za-z0-9_]*)\(`)
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range funcName.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !defined["TestDocumentedTestsExist"] {
		t.Fatal("the walk found no test functions")
	}

	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile("`((?:Test|Benchmark)[A-Z][A-Za-z0-9_]*)")
	for _, doc := range append(docs, "../../README.md") {
		var missing []string
		for _, m := range named.FindAllStringSubmatch(read(t, doc), -1) {
			if !defined[m[1]] && !slices.Contains(missing, m[1]) {
				missing = append(missing, m[1])
			}
		}
		if len(missing) > 0 {
			t.Errorf("%s names tests that do not exist: %v", filepath.Base(doc), missing)
		}
	}
}
