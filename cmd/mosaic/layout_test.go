package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestImportsRunDownTheLayout: the developers' layout page (docs/dev/layout.md)
// puts each package in a layer (its table "Which package may import which"),
// and a package imports only packages of a layer below its own. The rule is
// read from that page and the arrows from the import graph (go list), so the
// two cannot drift.
func TestImportsRunDownTheLayout(t *testing.T) {
	layer := layoutLayers(t)
	list := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "mosaic/...")
	list.Dir = "../.."
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], "mosaic/")
		if !ok {
			continue
		}
		own, ok := layer[pkg]
		if !ok {
			t.Errorf("%s has no layer in docs/dev/layout.md: give it a row", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, "mosaic/")
			if !ok {
				continue
			}
			if l, known := layer[dep]; known && l <= own {
				t.Errorf("%s (layer %d) imports %s (layer %d): an import runs only down the Layout's layers", pkg, own, dep, l)
			}
		}
	}
}

// layoutPage is the developers' page that holds the table of layers.
const layoutPage = "../../docs/dev/layout.md"

// layoutLayers reads the layout page's table of layers: package -> layer.
func layoutLayers(t *testing.T) map[string]int {
	b, err := os.ReadFile(layoutPage)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "## Which package may import which\n")
	if !ok {
		t.Fatalf("%s has no section \"Which package may import which\"", layoutPage)
	}
	section, _, _ = strings.Cut(section, "\n#")
	row := regexp.MustCompile(`(?m)^\| (\d+) \| ([^|]*) \|`)
	name := regexp.MustCompile("`([a-z/-]+)`")
	layer := map[string]int{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		n, _ := strconv.Atoi(m[1])
		for _, p := range name.FindAllStringSubmatch(m[2], -1) {
			if _, dup := layer[p[1]]; dup {
				t.Errorf("%s has two rows in the layers of %s", p[1], layoutPage)
			}
			layer[p[1]] = n
		}
	}
	if len(layer) == 0 {
		t.Fatalf("the layers table of %s has no rows", layoutPage)
	}
	return layer
}

// TestDocCommentsNameTheirDeclaration: a doc comment sits on the thing it
// describes. Each begins with the name of its function or type (or "A",
// "An" or "The" and the name): a comment left above another declaration
// (two stacked, the first one's function moved away) names the wrong one.
func TestDocCommentsNameTheirDeclaration(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			name, doc := declDoc(decl)
			if doc == nil || name == "init" {
				continue
			}
			words := strings.Fields(doc.Text())
			if len(words) > 1 && (words[0] == "A" || words[0] == "An" || words[0] == "The") {
				words = words[1:]
			}
			if len(words) > 0 && strings.TrimRight(words[0], ".,:") != name {
				t.Errorf("%s: the doc comment of %s begins %q: it belongs to another declaration, or should name %s", fset.Position(decl.Pos()), name, words[0], name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// declDoc is a function's or a lone type's name and doc comment.
func declDoc(decl ast.Decl) (string, *ast.CommentGroup) {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		return d.Name.Name, d.Doc
	case *ast.GenDecl:
		if len(d.Specs) == 1 {
			if ts, ok := d.Specs[0].(*ast.TypeSpec); ok {
				return ts.Name.Name, d.Doc
			}
		}
	}
	return "", nil
}

// maxFuncLines bounds a function's length (from its func line to its
// closing brace): one longer hides a name for each of its steps.
const maxFuncLines = 100

// TestFunctionsFit: no function outside the tests is longer than
// maxFuncLines.
func TestFunctionsFit(t *testing.T) {
	fset := token.NewFileSet()
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			fn, ok := n.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				return true
			}
			if lines := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; lines > maxFuncLines {
				t.Errorf("%s: %s is %d lines long, more than %d: give its steps names of their own", fset.Position(fn.Pos()), fn.Name.Name, lines, maxFuncLines)
			}
			return false
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
