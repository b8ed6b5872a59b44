"""wgsl_unroll: `// @unroll` loops written out with the loop variable a const per block."""
from webrlx.kernels import raw_shader, render
from webrlx.wgsl_unroll import unroll

SRC = """const NT: u32 = 256u;
const NL: u32 = (64u * 16u + NT - 1u) / NT;
const KW: u32 = min(2u, NL);
fn f() {
    // @unroll
    for (var r = 0u; r < KW; r++) {
        let e = r * 4u;  // a { in a comment
        // @unroll
        for (var c = 0u; c < NL; c++) { s[r][c] = v.r; }
    }
}
"""


def test_nested_loops_are_written_out_with_const_bounds_from_module_consts():
    out = unroll(SRC)
    assert "for (" not in out
    assert out.count("{ const r = ") == 2 and out.count("{ const c = ") == 8
    assert "{ const r = 1u;" in out and "{ const c = 3u; s[r][c] = v.r; }" in out
    assert "a { in a comment" in out                      # comments kept, braces in them skipped


def test_loops_that_cannot_be_written_out_stay_loops():
    kept = [
        "fn f() {\n    // @unroll\n    for (var r = 0u; r < 4u; r++) { if (x) { continue; } }\n}\n",
        "fn f() {\n    // @unroll\n    for (var r = 0u; r < p.n; r++) { y += 1.0; }\n}\n",
        "fn f() {\n    // @unroll\n    for (var r = 0u; r < 4u; r += 2u) { y += 1.0; }\n}\n",
        "fn f() {\n    for (var r = 0u; r < 4u; r++) { y += 1.0; }\n}\n",   # unmarked
    ]
    for src in kept:
        assert unroll(src) == src


def test_signed_loops_get_signed_consts():
    out = unroll("fn f() {\n    // @unroll\n    for (var i = 0; i < 2; i++) { y[i] = 0.0; }\n}\n")
    assert "{ const i = 0i;" in out and "{ const i = 1i;" in out


def test_flash_attention_renders_without_loops_over_its_private_arrays():
    src = render("attention/attention_flash", T="f32", D="64",
                 ROW_TILES=raw_shader("common/flash_rows"), QKV="vec4<f32>")
    assert "for (var r = 0u; r < 4u" not in src and "for (var u = 0u; u < NL" not in src
    assert "{ const r = 3u;" in src and "{ const u = 3u;" in src   # NL = 4 at D 64
