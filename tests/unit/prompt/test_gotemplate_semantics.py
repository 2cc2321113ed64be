"""Go text/template behaviour the Go 1.19 harness cannot show (Go 1.22+ range over
int, Go 1.23 {{else with}}) and the error positions and options we add."""

import pytest

from engine.errors import TemplateError
from engine.prompt.gotemplate import render
from engine.prompt.gotemplate.values import format_float_g, to_json


def test_range_over_int_go122():
    source = ("{{range 3}}{{.}}{{end}}|{{range $i := 2}}{{$i}}{{end}}|"
              "{{range 0}}x{{else}}none{{end}}")
    assert render(source, {}) == "012|01|none"
    with pytest.raises(TemplateError, match="more than one variable"):
        render("{{range $i, $v := 3}}{{end}}", {})


def test_else_with_go123():
    source = "{{with .A}}a={{.}}{{else with .B}}b={{.}}{{else}}none{{end}}"
    assert render(source, {"A": "", "B": "x"}) == "b=x"
    assert render(source, {"A": "", "B": ""}) == "none"


def test_trim_marker_needs_space():
    assert render("a {{- 1}} b", {}) == "a1 b"
    assert render("a {{-1}} b", {}) == "a -1 b"          # a negative number, not a trim
    assert render("a {{1 -}}\n\t b", {}) == "a 1b"
    assert render("x {{- /* c */ -}} y", {}) == "xy"


def test_missing_key_options():
    assert render("{{.M.x}}", {"M": {}}) == "<no value>"
    with pytest.raises(TemplateError, match=r"nil pointer evaluating interface \{\}\.y"):
        render("{{.M.x.y}}", {"M": {}})
    assert render("{{.M.x.y}}", {"M": {}}, missing_key="default") == "<no value>"
    with pytest.raises(TemplateError, match='map has no entry for key "x"'):
        render("{{.M.x}}", {"M": {}}, missing_key="error")


@pytest.mark.parametrize(("source", "where", "message"), [
    ("ab\n  {{ end }}", "2:5", "unexpected {{end}}"),
    ("{{ if .A }}\n{{ $nope }}", "2:3", 'undefined variable "$nope"'),
    ("x\ny {{ .A | 3 }}", "2:10", "non executable command in pipeline stage 2"),
    ("{{ range .L }}\n\n{{ else }}{{ else }}{{ end }}", "3:13", "expected end; found {{else}}"),
    ("{{ printf \"%d\" }}\n {{ .A.B }}", "2:6", "executing at <.A.B>: nil pointer evaluating"),
])
def test_errors_name_line_and_column(source, where, message):
    with pytest.raises(TemplateError) as info:
        render(source, {"A": None, "L": [1]})
    assert str(info.value).startswith(f"template: {where}: ")
    assert message in str(info.value)


def test_go_number_formats():
    assert [format_float_g(x) for x in (3.0, 2.5, 1e6, 123456.0, 1e-5, 0.0001, -1e21)] == \
        ["3", "2.5", "1e+06", "123456", "1e-05", "0.0001", "-1e+21"]
    assert to_json([1e21, 1e-7, 0.5, 100.0, "<&>\u2028"]) == \
        '[1e+21,1e-7,0.5,100,"\\u003c\\u0026\\u003e\\u2028"]'
