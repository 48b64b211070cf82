package helmrender

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/Masterminds/sprig/v3"
	"helm.sh/helm/v3/pkg/chart"
)

// writeChart writes a chart named name with the given files (paths relative to the chart) into a
// new directory and returns it.
func writeChart(t *testing.T, name string, files map[string]string) string {
	t.Helper()

	dir := filepath.Join(t.TempDir(), name)
	files["Chart.yaml"] = "apiVersion: v2\nname: " + name + "\nversion: 0.1.0\n"

	for p, text := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}

		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	return dir
}

func cm(name, body string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n  v: \"" + body + "\"\n"
}

// The analysis finds every way a template reaches a function whose result varies: directly, in a
// nested pipeline, through include and template (however deep), through a block, with a computed
// include name, through tpl, and through a name defined twice; a field that is named like such a
// function does not count. What a varying file needs is every file defining a template it
// reaches.
func TestVaryingTemplates(t *testing.T) {
	dir := writeChart(t, "demo", map[string]string{
		"templates/_steady.tpl":       `{{ define "steady" }}{{ .Release.Name | upper }}{{ end }}`,
		"templates/_deep.tpl":         `{{ define "a" }}{{ include "b" . }}{{ end }}{{ define "b" }}{{ randAlphaNum 8 }}{{ end }}`,
		"templates/_dup1.tpl":         `{{ define "dup" }}same{{ end }}`,
		"templates/_dup2.tpl":         `{{ define "dup" }}{{ uuidv4 }}{{ end }}`,
		"templates/steady.yaml":       cm("steady", `{{ include "steady" . }}{{ template "steady" . }}{{ .Values.now }}{{ $.Values.keys }}`),
		"templates/direct.yaml":       cm("direct", `{{ if true }}{{ printf "%s" (.Values.x | date "2006") }}{{ end }}`),
		"templates/deep.yaml":         cm("deep", `{{ include "a" . }}`),
		"templates/block.yaml":        cm("block", `{{ block "blk" . }}{{ genPrivateKey "rsa" | sha256sum }}{{ end }}`),
		"templates/keys.yaml":         cm("keys", `{{ range keys .Values }}{{ . }}{{ end }}`),
		"templates/computed.yaml":     cm("computed", `{{ include (printf "st%s" "eady") . }}`),
		"templates/tpl.yaml":          cm("tpl", `{{ tpl "{{ .Release.Name }}" . }}`),
		"templates/dup.yaml":          cm("dup", `{{ with .Values }}{{ else }}{{ template "dup" . }}{{ end }}`),
		"templates/NOTES.txt":         `{{ now }}`,
		"charts/sub/Chart.yaml":       "apiVersion: v2\nname: sub\nversion: 0.1.0\n",
		"charts/sub/templates/s.yaml": cm("sub", `{{ include "b" . }}`),
	})

	c, err := (&Archive{Dir: dir}).Load()
	if err != nil {
		t.Fatal(err)
	}

	varies, needed, ok := varyingTemplates(c)
	if !ok {
		t.Fatal("the chart was not analysed")
	}

	want := []string{
		"demo/charts/sub/templates/s.yaml", "demo/templates/block.yaml", "demo/templates/computed.yaml",
		"demo/templates/deep.yaml", "demo/templates/direct.yaml", "demo/templates/dup.yaml",
		"demo/templates/keys.yaml", "demo/templates/tpl.yaml",
	}
	if got := slices.Sorted(maps.Keys(varies)); !slices.Equal(got, want) {
		t.Errorf("varying templates:\n got %v\nwant %v", got, want)
	}

	// computed.yaml and tpl.yaml may call any template: every file that defines one is needed.
	wantNeeded := append(slices.Clone(want), "demo/templates/_deep.tpl", "demo/templates/_dup1.tpl",
		"demo/templates/_dup2.tpl", "demo/templates/_steady.tpl")
	slices.Sort(wantNeeded)

	if got := slices.Sorted(maps.Keys(needed)); !slices.Equal(got, wantNeeded) {
		t.Errorf("needed templates:\n got %v\nwant %v", got, wantNeeded)
	}

	kept := withTemplates(c, needed)
	if len(kept.Templates) != len(wantNeeded)-1 || len(kept.Dependencies()) != 1 ||
		len(kept.Dependencies()[0].Templates) != 1 || kept.Dependencies()[0].Parent() != kept {
		t.Errorf("the reduced chart keeps %d templates and %d subcharts", len(kept.Templates), len(kept.Dependencies()))
	}

	if len(c.Templates) != 13 {
		t.Errorf("reducing the chart changed it: %d templates", len(c.Templates))
	}

	broken := &chart.Chart{Metadata: &chart.Metadata{Name: "broken"}, Templates: []*chart.File{
		{Name: "templates/x.yaml", Data: []byte("{{ if }}")},
	}}
	if _, _, ok := varyingTemplates(broken); ok {
		t.Error("a template that does not parse was analysed")
	}
}

// Every function a Helm template can call is either varying or steady. The list below is sprig's
// as of the version pinned: a sprig upgrade that adds or drops a function fails here, so that
// someone decides whether its result varies (until then it counts as varying).
func TestEveryFunctionIsClassified(t *testing.T) {
	const sprigFuncs = `abbrev abbrevboth add add1 add1f addf adler32sum ago all any append atoi b32dec b32enc
	b64dec b64enc base bcrypt biggest buildCustomCert camelcase cat ceil chunk clean coalesce compact concat
	contains date dateInZone dateModify date_in_zone date_modify decryptAES deepCopy deepEqual default
	derivePassword dict dig dir div divf duration durationRound empty encryptAES env expandenv ext fail first
	float64 floor fromJson genCA genCAWithKey genPrivateKey genSelfSignedCert genSelfSignedCertWithKey
	genSignedCert genSignedCertWithKey get getHostByName has hasKey hasPrefix hasSuffix hello htmlDate
	htmlDateInZone htpasswd indent initial initials int int64 isAbs join kebabcase keys kindIs kindOf last list
	lower max maxf merge mergeOverwrite min minf mod mul mulf mustAppend mustChunk mustCompact mustDateModify
	mustDeepCopy mustFirst mustFromJson mustHas mustInitial mustLast mustMerge mustMergeOverwrite mustPrepend
	mustPush mustRegexFind mustRegexFindAll mustRegexMatch mustRegexReplaceAll mustRegexReplaceAllLiteral
	mustRegexSplit mustRest mustReverse mustSlice mustToDate mustToJson mustToPrettyJson mustToRawJson mustUniq
	mustWithout must_date_modify nindent nospace now omit osBase osClean osDir osExt osIsAbs pick pluck plural
	prepend push quote randAlpha randAlphaNum randAscii randBytes randInt randNumeric regexFind regexFindAll
	regexMatch regexQuoteMeta regexReplaceAll regexReplaceAllLiteral regexSplit repeat replace rest reverse
	round semver semverCompare seq set sha1sum sha256sum sha512sum shuffle slice snakecase sortAlpha split
	splitList splitn squote sub subf substr swapcase ternary title toDate toDecimal toJson toPrettyJson
	toRawJson toString toStrings trim trimAll trimPrefix trimSuffix trimall trunc tuple typeIs typeIsLike
	typeOf uniq unixEpoch unset until untilStep untitle upper urlJoin urlParse uuidv4 values without wrap
	wrapWith`

	if got := slices.Sorted(maps.Keys(sprig.TxtFuncMap())); !slices.Equal(got, strings.Fields(sprigFuncs)) {
		t.Errorf("sprig's functions changed; classify them in varying or steady and update this list:\n%v", got)
	}

	for f := range sprig.TxtFuncMap() {
		if f != "env" && f != "expandenv" && steady[f] == varying[f] {
			t.Errorf("%s is both or neither steady and varying", f)
		}
	}

	for _, f := range []string{"now", "date", "genCA", "randAlphaNum", "keys", "tpl", "shuffle", "bcrypt"} {
		if steady[f] || !varying[f] {
			t.Errorf("%s counts as steady", f)
		}
	}
}

// The determinism gate renders only what can vary a second time: a chart with nothing that
// varies is rendered once; map order (keys) is caught; a function that varies but does not
// change the output (Cilium's duration checks call now) passes, and so does an include of a
// computed name, whose target the second render has.
func TestGateRendersWhatVaries(t *testing.T) {
	ctx := context.Background()
	r := &Renderer{KubeVersion: "v1.34.1"}

	steadyChart := writeChart(t, "steady", map[string]string{"templates/a.yaml": cm("a", "{{ .Release.Name }}")})
	if _, err := r.Render(ctx, Release{Path: "p", Name: "x", Namespace: "ns", Source: Source{Chart: steadyChart}}); err != nil {
		t.Fatal(err)
	}

	if r.Passes() != 1 {
		t.Errorf("a chart with nothing that varies took %d passes, want 1", r.Passes())
	}

	values := map[string]any{}
	for _, k := range strings.Fields("a b c d e f g h i j k l m n o p q r s t") {
		values[k] = k
	}

	order := writeChart(t, "order", map[string]string{
		"templates/a.yaml":    cm("a", "{{ range keys .Values }}{{ . }}{{ end }}"),
		"templates/b.yaml":    cm("b", "{{ .Release.Name }}"),
		"templates/time.yaml": cm("time", `{{ if ne now (now | dateModify "1h") }}later{{ end }}`),
		"templates/_name.tpl": `{{ define "name" }}{{ .Release.Name }}{{ end }}`,
		"templates/dyn.yaml":  cm("dyn", `{{ include (print "na" "me") . }}`),
	})

	_, err := r.Render(ctx, Release{Path: "p", Name: "x", Namespace: "ns", Source: Source{Chart: order}, Values: values})
	if err == nil || !strings.Contains(err.Error(), "renders differently every time (ConfigMap ns/a differ)") {
		t.Errorf("map order was not caught, or more than the map differs: %v", err)
	}

	if r.Passes() != 3 {
		t.Errorf("%d passes in all, want 3", r.Passes())
	}

	_, err = r.Render(ctx, Release{Path: "p", Name: "x", Namespace: "ns", Source: Source{Chart: order}, Values: map[string]any{"a": 1}})
	if err != nil {
		t.Errorf("a chart whose varying functions do not change its output was refused: %v", err)
	}

	if r.Passes() != 5 {
		t.Errorf("%d passes in all, want 5: the second render of what varies needed no third", r.Passes())
	}
}
