package main

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// planMakers are the functions that build a session's plan (units.Spec)
// before it is returned, and so may set its fields: every other function
// only reads a plan, or makes a new one from these. Each with why.
var planMakers = map[string]string{
	"mosaic/manager/request.finishSpec":      "finishes the spec prepare made (mode, lends, injection, env) before prepare returns it",
	"mosaic/manager/request.belowRepository": "prepare's clone mode (through cloneOf): the workspace moved to its repository's top",
	"mosaic/manager/request.sshAgentOf":      "prepare's --lend-ssh-key and --lend-ssh-sign, through finishSpec",
	"mosaic/manager/request.gitLendOf":       "prepare's --lend-git, through finishSpec",
	"mosaic/manager/request.planInjection":   "prepare's key injection, through finishSpec",
	"mosaic/manager.complete":                "newPlan's host facts (binaries, promise, protected entries) before it returns the plan",
	"mosaic/manager.(*Manager).finishPlan":   "its edit, a closure newPlan applies to the checked spec before complete",
	"mosaic/manager.cloneIDs":                "the copy's identities, for finishPlan's edit and on makeClone's own copy",
	"mosaic/manager.renamed":                 "claim's rename: a new plan made from a copy passed by value, and returned",
	"mosaic/manager.makeClone":               "the copy's facts: a new plan made from a copy passed by value, and returned",
}

// TestNothingChangesAPlan: a session's plan (units.Spec) is made once, by
// manager.NewPlan, and nothing after changes it: a start makes a
// units.Launch beside it, and a step that learns more (claim's rename, the
// clone's copy) returns a new plan. Go cannot make a struct's exported
// fields read-only, so this test reads the module's code (go/types, from
// go list's export data) and fails on any write to a field of a
// units.Spec, nested or not (spec.X = , spec.Clone.Dir = , spec.Env[i] = ,
// spec.X++, &spec.X, a pointer method called on spec.X) outside
// planMakers. Tests are not read: a test builds its fixture plan field by
// field, as the makers do, and what it changes never reaches a session
// started by mosaic. Nor are files of the mosaic_testhooks build (none
// touches a plan). What it cannot see: a write through an alias
// (c := spec.Clone; c.Dir = ...), or into a slice's array through a copy
// of the slice.
func TestNothingChangesAPlan(t *testing.T) {
	for _, w := range planWrites(t, "../..") {
		t.Error(w)
	}
}

// planWrites are the writes to a plan's fields outside planMakers, one
// line each, in the module at root.
func planWrites(t *testing.T, root string) []string {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	pkgs, export := listPackages(t, root)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(export[path])
	})
	var found []string
	seen, writers := map[string]bool{}, map[string]bool{}
	for _, p := range pkgs {
		var files []*ast.File
		for _, name := range p.files {
			f, err := parser.ParseFile(fset, filepath.Join(p.dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Selections: map[*ast.SelectorExpr]*types.Selection{}, Defs: map[*ast.Ident]types.Object{}}
		conf := types.Config{Importer: imp}
		if _, err := conf.Check(p.path, fset, files, info); err != nil {
			t.Fatalf("type-checking %s: %v", p.path, err)
		}
		for _, f := range files {
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				name := funcName(p.path, fn)
				seen[name] = true
				ws := specWrites(fn.Body, info)
				if _, ok := planMakers[name]; ok {
					if len(ws) > 0 {
						writers[name] = true
					}
					continue
				}
				for _, w := range ws {
					pos := fset.Position(w.at.Pos())
					rel, _ := filepath.Rel(root, pos.Filename)
					found = append(found, rel+":"+strconv.Itoa(pos.Line)+": "+name+" "+w.how+" "+types.ExprString(w.at)+", a field of a plan (units.Spec), which nothing changes once manager.NewPlan made it: "+
						"put what a start makes in its units.Launch, or make a new plan from a copy and return it (as renamed does) and name that function in planMakers with why")
				}
			}
		}
	}
	for name := range planMakers {
		switch {
		case !seen[name]:
			found = append(found, "planMakers names "+name+", which is not in the module: remove it, or give its new name")
		case !writers[name]:
			found = append(found, "planMakers names "+name+", which sets no field of a plan: remove it")
		}
	}
	return found
}

// modulePackage is a package of the module: its import path, directory
// and non-test files.
type modulePackage struct {
	path, dir string
	files     []string
}

// listPackages lists the module's packages and the export data of every
// package they import (go list -export, which builds them as go vet does).
func listPackages(t *testing.T, root string) ([]modulePackage, map[string]string) {
	t.Helper()
	list := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}\t{{.Dir}}\t{{if .Module}}{{.Module.Path}}{{end}}\t{{join .GoFiles \" \"}}", "./...")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	var pkgs []modulePackage
	export := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		export[f[0]] = f[1]
		if f[3] == "mosaic" {
			pkgs = append(pkgs, modulePackage{path: f[0], dir: f[2], files: strings.Fields(f[4])})
		}
	}
	return pkgs, export
}

// funcName is a function's name as planMakers spells it: path.Func or
// path.(*Recv).Method (path.Recv.Method for a value receiver).
func funcName(pkg string, fn *ast.FuncDecl) string {
	if fn.Recv == nil {
		return pkg + "." + fn.Name.Name
	}
	recv := types.ExprString(fn.Recv.List[0].Type)
	if strings.HasPrefix(recv, "*") {
		recv = "(" + recv + ")"
	}
	return pkg + "." + recv + "." + fn.Name.Name
}

// specWrites are the expressions in body that write to a field of a
// units.Spec: the left side of an assignment or ++/--, the operand of &,
// the receiver of a method on a pointer called on an addressable value.
func specWrites(body *ast.BlockStmt, info *types.Info) []planWrite {
	var ws []planWrite
	check := func(e ast.Expr, how string) {
		if writesSpec(e, info) {
			ws = append(ws, planWrite{e, how})
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if n.Tok != token.DEFINE {
				for _, l := range n.Lhs {
					check(l, "assigns to")
				}
			}
		case *ast.IncDecStmt:
			check(n.X, "increments or decrements")
		case *ast.RangeStmt:
			if n.Tok == token.ASSIGN {
				check(n.Key, "assigns to")
				if n.Value != nil {
					check(n.Value, "assigns to")
				}
			}
		case *ast.UnaryExpr:
			if n.Op == token.AND {
				check(n.X, "takes the address of")
			}
		case *ast.CallExpr:
			if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
				if s := info.Selections[sel]; s != nil && s.Kind() == types.MethodVal {
					if _, ptr := s.Obj().Type().(*types.Signature).Recv().Type().(*types.Pointer); ptr && !isPointer(info.Types[sel.X].Type) {
						check(sel.X, "calls "+sel.Sel.Name+", a method on a pointer, on")
					}
				}
			}
		}
		return true
	})
	return ws
}

// planWrite is a write to a plan's field: the expression written, and how.
type planWrite struct {
	at  ast.Expr
	how string
}

// writesSpec reports whether writing to e writes to a field of a
// units.Spec: e is, or is within (an index, a field, a pointer's target,
// a slice's element), a field selected from one.
func writesSpec(e ast.Expr, info *types.Info) bool {
	for {
		switch x := e.(type) {
		case *ast.ParenExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.SelectorExpr:
			if s := info.Selections[x]; s != nil && s.Kind() == types.FieldVal && isSpec(info.Types[x.X].Type) {
				return true
			}
			e = x.X
		default:
			return false
		}
	}
}

// isSpec reports whether t is units.Spec or a pointer to one.
func isSpec(t types.Type) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == "Spec" && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == "mosaic/units"
}

// isPointer reports whether t is a pointer.
func isPointer(t types.Type) bool {
	_, ok := t.(*types.Pointer)
	return ok
}
