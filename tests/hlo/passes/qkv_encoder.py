"""An encoder self-attention layer as IR text: x [2, seq, 16] @ w [16, 48] (+ b) -> q, k, v sliced out of the
merged projection, 2 heads of 8, as the layout passes leave them (reshape and transpose are bitcasts)."""

from __future__ import annotations

DOT = "lhs_batch_dims={}, lhs_contracting_dims={2}, rhs_batch_dims={}, rhs_contracting_dims={0}"


def encoder(seq: int = 8, bias: bool = True, causal: bool = False, extra_user: bool = False, t: str = "f32",
            w_layout: str = "1,0", d: int = 8) -> str:
    heads, hidden = 2, 2 * d
    n = 3 * heads * d
    lines = [f"%x = {t}[2,{seq},{hidden}]{{2,1,0}} parameter(0), name=x",
             f"%w = {t}[{hidden},{n}]{{{w_layout}}} parameter(1), name=w"]
    if bias:
        lines += [f"%b = {t}[{n}]{{0}} parameter(2), name=b",
                  f"%d = {t}[2,{seq},{n}]{{2,1,0}} dot(%x, %w), {DOT}",
                  f"%bb = {t}[2,{seq},{n}]{{2,1,0}} broadcast(%b), dimensions={{2}}",
                  f"%qkv = {t}[2,{seq},{n}]{{2,1,0}} add(%d, %bb)"]
    else:
        lines += [f"%qkv = {t}[2,{seq},{n}]{{2,1,0}} dot(%x, %w), {DOT}"]
    for i, name in enumerate("qkv"):
        lines += [(f"%{name}s = {t}[2,{seq},{heads * d}]{{2,1,0}} slice(%qkv), start_indices={{0,0,{i * heads * d}}}, "
                   f"limit_indices={{2,{seq},{(i + 1) * heads * d}}}, strides={{1,1,1}}"),
                  f"%{name}r = {t}[2,{seq},{heads},{d}]{{3,2,1,0}} bitcast(%{name}s)",
                  f"%{name}h = {t}[2,{heads},{seq},{d}]{{3,1,2,0}} bitcast(%{name}r)"]
    lines.append(f"%a = {t}[2,{heads},{seq},{d}]{{3,1,2,0}} attention(%qh, %kh, %vh), "
                 f"causal={'true' if causal else 'false'}, scale=0.35")
    if extra_user:  # the projection is a model output too
        lines.append(f"ROOT %r = ({t}[2,{heads},{seq},{d}]{{3,1,2,0}}, {t}[2,{seq},{n}]{{2,1,0}}) tuple(%a, %qkv)")
    else:
        lines.append(f"ROOT %r = {t}[2,{heads},{seq},{d}]{{3,1,2,0}} bitcast(%a)")
    return "HloModule m\n\nENTRY %main {\n  " + "\n  ".join(lines) + "\n}\n"


def encoder_layer(seq: int = 8, bias: bool = True, out_bias: bool = True, norm: str = "layer-norm",
                  extra_user: bool = False, t: str = "f32", wo_layout: str = "1,0", residual: str = "x",
                  ffn: int = 0, ffn_user: bool = False, d: int = 8) -> str:
    """encoder() then the attention block's output: the attention output [2, heads, seq, d] read as [2, seq, 2 * d]
    rows (views), times w_o [2 * d, 2 * d] (+ b_o), plus the residual (the layer's input x), normalized per row
    (layer-norm with a scale and a bias, or rms-norm with a scale; "none": no norm). With ffn, the FFN after it:
    the normalized rows y @ w1 [16, ffn], GELU, @ w2 [ffn, 16], plus y, layer-norm (with ffn_user, y is a
    model output too)."""
    heads, hidden = 2, 2 * d
    text = encoder(seq=seq, bias=bias, t=t, d=d)
    head, body = text.split("ENTRY %main {\n  ")
    lines = [line.strip() for line in body.rstrip("}\n").splitlines() if not line.strip().startswith("ROOT")]
    n = 3 if bias else 2
    lines += [f"%at = {t}[2,{seq},{heads},{d}]{{3,2,1,0}} bitcast(%a)",
              f"%ao = {t}[2,{seq},{hidden}]{{2,1,0}} bitcast(%at)",
              f"%wo = {t}[{hidden},{hidden}]{{{wo_layout}}} parameter({n}), name=wo",
              f"%p = {t}[2,{seq},{hidden}]{{2,1,0}} dot(%ao, %wo), {DOT}"]
    n += 1
    value = "%p"
    if out_bias:
        lines += [f"%bo = {t}[{hidden}]{{0}} parameter({n}), name=bo",
                  f"%bob = {t}[2,{seq},{hidden}]{{2,1,0}} broadcast(%bo), dimensions={{2}}",
                  f"%pb = {t}[2,{seq},{hidden}]{{2,1,0}} add(%p, %bob)"]
        n += 1
        value = "%pb"
    lines.append(f"%res = {t}[2,{seq},{hidden}]{{2,1,0}} add({value}, %{residual})")
    if norm == "layer-norm":
        lines += [f"%g = {t}[{hidden}]{{0}} parameter({n}), name=g",
                  f"%be = {t}[{hidden}]{{0}} parameter({n + 1}), name=be",
                  f"%ln = {t}[2,{seq},{hidden}]{{2,1,0}} layer-norm(%res, %g, %be), dimensions={{2}}, epsilon=1e-05"]
    elif norm == "rms-norm":
        lines += [f"%g = {t}[{hidden}]{{0}} parameter({n}), name=g",
                  f"%ln = {t}[2,{seq},{hidden}]{{2,1,0}} rms-norm(%res, %g), dimensions={{2}}, epsilon=1e-05"]
    else:
        lines.append(f"%ln = {t}[2,{seq},{hidden}]{{2,1,0}} negate(%res)")
    if ffn:
        n += 2 if norm == "layer-norm" else 1
        lines += [f"%w1 = {t}[{hidden},{ffn}]{{1,0}} parameter({n}), name=w1",
                  f"%w2 = {t}[{ffn},{hidden}]{{1,0}} parameter({n + 1}), name=w2",
                  f"%g2 = {t}[{hidden}]{{0}} parameter({n + 2}), name=g2",
                  f"%be2 = {t}[{hidden}]{{0}} parameter({n + 3}), name=be2",
                  f"%h = {t}[2,{seq},{ffn}]{{2,1,0}} dot(%ln, %w1), {DOT}",
                  f"%act = {t}[2,{seq},{ffn}]{{2,1,0}} gelu(%h), approximate=none",
                  f"%f = {t}[2,{seq},{hidden}]{{2,1,0}} dot(%act, %w2), {DOT}",
                  f"%fr = {t}[2,{seq},{hidden}]{{2,1,0}} add(%f, %ln)",
                  f"%ln2 = {t}[2,{seq},{hidden}]{{2,1,0}} layer-norm(%fr, %g2, %be2), dimensions={{2}}, epsilon=1e-05"]
        if ffn_user:
            lines.append(f"ROOT %r = ({t}[2,{seq},{hidden}]{{2,1,0}}, {t}[2,{seq},{hidden}]{{2,1,0}}) tuple(%ln2, %ln)")
        else:
            lines.append(f"ROOT %r = {t}[2,{seq},{hidden}]{{2,1,0}} bitcast(%ln2)")
    elif extra_user:  # the attention output is a model output too
        lines.append(f"ROOT %r = ({t}[2,{seq},{hidden}]{{2,1,0}}, {t}[2,{seq},{hidden}]{{2,1,0}}) tuple(%ln, %ao)")
    else:
        lines.append(f"ROOT %r = {t}[2,{seq},{hidden}]{{2,1,0}} bitcast(%ln)")
    return head + "ENTRY %main {\n  " + "\n  ".join(lines) + "\n}\n"


def int8_encoder(seq: int = 8, v_float: bool = False, causal: bool = False, d: int = 8) -> str:
    """encoder() as an int8 QDQ export leaves it after the int8 rules (mlcc/hlo/passes/quantized_dot.py,
    recognize/quant_attention.py): x u8 [2, seq, 16] @ w s8 [16, 48] -> s32, and q, k and v computed from slices
    of it: dequantized (s32 * scale), requantized to u8 (round half to even, zero point 128, clamp), split into
    2 heads of d by bitcasts, dequantized again; a fake-quantized attention (score_quant, prob_quant). With v_float,
    v is a float input instead (mixed quantization)."""
    heads, hidden = 2, 2 * d
    n = 3 * heads * d
    lines = [f"%x = u8[2,{seq},{hidden}]{{2,1,0}} parameter(0), name=x",
             f"%w = s8[{hidden},{n}]{{1,0}} parameter(1), name=w",
             f"%qkv = s32[2,{seq},{n}]{{2,1,0}} dot(%x, %w), {DOT}",
             "%lo = f32[] constant(), value={0.0}",
             "%hi = f32[] constant(), value={255.0}",
             "%zp = f32[] constant(), value={128.0}"]
    for i, (name, scale, inv, back) in enumerate(zip("qkv", (0.004, 0.005, 0.003), (0.9, 0.7, 1.1),
                                                     (0.011, 0.009, 0.013))):
        if name == "v" and v_float:
            lines.append(f"%vq = f32[2,{heads},{seq},{d}]{{3,1,2,0}} parameter(2), name=v")
            continue
        s, h, c = f"[2,{seq},{hidden}]{{2,1,0}}", f"[2,{heads},{seq},{d}]{{3,1,2,0}}", "dimensions={}"
        lines += [(f"%{name}s = s32{s} slice(%qkv), start_indices={{0,0,{i * hidden}}}, "
                   f"limit_indices={{2,{seq},{(i + 1) * hidden}}}, strides={{1,1,1}}"),
                  f"%{name}f = f32{s} convert(%{name}s)",
                  f"%{name}sc = f32[] constant(), value={{{scale * inv}}}",
                  f"%{name}sb = f32{s} broadcast(%{name}sc), {c}",
                  f"%{name}m = f32{s} multiply(%{name}f, %{name}sb)",
                  f"%{name}r = f32{s} round-nearest-even(%{name}m)",
                  f"%{name}zb = f32{s} broadcast(%zp), {c}",
                  f"%{name}a = f32{s} add(%{name}r, %{name}zb)",
                  f"%{name}c = f32{s} clamp(%lo, %{name}a, %hi)",
                  f"%{name}u = u8{s} convert(%{name}c)",
                  f"%{name}b = u8[2,{seq},{heads},{d}]{{3,2,1,0}} bitcast(%{name}u)",
                  f"%{name}h = u8{h} bitcast(%{name}b)",
                  f"%{name}hf = f32{h} convert(%{name}h)",
                  f"%{name}z4 = f32{h} broadcast(%zp), {c}",
                  f"%{name}d = f32{h} subtract(%{name}hf, %{name}z4)",
                  f"%{name}bc = f32[] constant(), value={{{back}}}",
                  f"%{name}b4 = f32{h} broadcast(%{name}bc), {c}",
                  f"%{name}q = f32{h} multiply(%{name}d, %{name}b4)"]
    lines.append(f"%a = f32[2,{heads},{seq},{d}]{{3,1,2,0}} attention(%qq, %kq, %vq), "
                 f"causal={'true' if causal else 'false'}, prob_quant={{254.9999849195601,0.0,0.0,255.0,"
                 "0.003921568859368563}, scale=1.0, score_quant={{1.0,6.83627948927615,126.0,0.0,255.0,"
                 "0.14627839624881744}}")
    lines.append(f"ROOT %r = f32[2,{heads},{seq},{d}]{{3,1,2,0}} bitcast(%a)")
    return "HloModule m\n\nENTRY %main {\n  " + "\n  ".join(lines) + "\n}\n"


def _requantize(lines: list[str], name: str, value: str, shape: str, inv: float, out: str = "u8") -> str:
    """QuantizeLinear of value (f32) to u8 at zero point 128 (round half to even, clamp): the u8 value's name."""
    c = "dimensions={}"
    lines += [f"%{name}i = f32[] constant(), value={{{inv}}}",
              f"%{name}ib = f32{shape} broadcast(%{name}i), {c}",
              f"%{name}m = f32{shape} multiply({value}, %{name}ib)",
              f"%{name}r = f32{shape} round-nearest-even(%{name}m)",
              f"%{name}zb = f32{shape} broadcast(%zp), {c}",
              f"%{name}a = f32{shape} add(%{name}r, %{name}zb)",
              f"%{name}c = f32{shape} clamp(%lo, %{name}a, %hi)",
              f"%{name}u = {out}{shape} convert(%{name}c)"]
    return f"%{name}u"


def _dequantize(lines: list[str], name: str, value: str, shape: str, scale: float, zp: bool = True) -> str:
    """DequantizeLinear of a u8 value (zero point 128) or, without zp, an s32 product times scale."""
    c = "dimensions={}"
    lines += [f"%{name}f = f32{shape} convert({value})",
              f"%{name}s = f32[] constant(), value={{{scale}}}",
              f"%{name}sb = f32{shape} broadcast(%{name}s), {c}"]
    x = f"%{name}f"
    if zp:
        lines += [f"%{name}zb = f32{shape} broadcast(%zp), {c}", f"%{name}d = f32{shape} subtract(%{name}f, %{name}zb)"]
        x = f"%{name}d"
    lines.append(f"%{name}v = f32{shape} multiply({x}, %{name}sb)")
    return f"%{name}v"


def int8_encoder_layer(seq: int = 8, ffn: int = 0, extra_user: bool = False, d: int = 8) -> str:
    """int8_encoder() then the int8 attention block's output as an int8 QDQ export leaves it: the attention output
    requantized to u8 and read as [2, seq, 16] rows, times w_o s8 [16, 16] -> s32, dequantized, plus the layer's
    input x dequantized, layer-norm, requantized to u8 (the layer's rows); with ffn, the FFN on those rows: @ w1
    s8 [16, ffn] -> s32, dequantized, GELU, requantized to u8, @ w2 s8 [ffn, 16] -> s32, dequantized, plus the
    rows dequantized, layer-norm, and the output quantized and dequantized (f32). With extra_user the u8
    attention output is a model output too."""
    heads, hidden = 2, 2 * d
    text = int8_encoder(seq=seq, d=d)
    head, body = text.split("ENTRY %main {\n  ")
    lines = [line.strip() for line in body.rstrip("}\n").splitlines() if not line.strip().startswith("ROOT")]
    rows, hs = f"[2,{seq},{hidden}]{{2,1,0}}", f"[2,{heads},{seq},{d}]{{3,1,2,0}}"
    au = _requantize(lines, "ao", "%a", hs, 40.0)
    lines += [f"%at = u8[2,{seq},{heads},{d}]{{3,2,1,0}} bitcast({au})",
              f"%ar = u8{rows} bitcast(%at)",
              f"%wo = s8[{hidden},{hidden}]{{1,0}} parameter(2), name=wo",
              f"%p = s32{rows} dot(%ar, %wo), {DOT}"]
    p = _dequantize(lines, "pd", "%p", rows, 0.0021, zp=False)
    x = _dequantize(lines, "xd", "%x", rows, 0.02)
    lines += [f"%res = f32{rows} add({p}, {x})",
              f"%g = f32[{hidden}]{{0}} parameter(3), name=g",
              f"%be = f32[{hidden}]{{0}} parameter(4), name=be",
              f"%ln = f32{rows} layer-norm(%res, %g, %be), dimensions={{2}}, epsilon=1e-05"]
    y = _requantize(lines, "y", "%ln", rows, 30.0)
    if ffn:
        fs = f"[2,{seq},{ffn}]{{2,1,0}}"
        lines += [f"%w1 = s8[{hidden},{ffn}]{{1,0}} parameter(5), name=w1",
                  f"%w2 = s8[{ffn},{hidden}]{{1,0}} parameter(6), name=w2",
                  f"%g2 = f32[{hidden}]{{0}} parameter(7), name=g2",
                  f"%be2 = f32[{hidden}]{{0}} parameter(8), name=be2",
                  f"%h = s32{fs} dot({y}, %w1), {DOT}"]
        hd = _dequantize(lines, "hd", "%h", fs, 0.0017, zp=False)
        lines.append(f"%act = f32{fs} gelu({hd}), approximate=none")
        h8 = _requantize(lines, "h8", "%act", fs, 25.0)
        lines.append(f"%f = s32{rows} dot({h8}, %w2), {DOT}")
        fd = _dequantize(lines, "fd", "%f", rows, 0.0019, zp=False)
        yd = _dequantize(lines, "yd", y, rows, 1 / 30.0)
        lines += [f"%fr = f32{rows} add({fd}, {yd})",
                  f"%ln2 = f32{rows} layer-norm(%fr, %g2, %be2), dimensions={{2}}, epsilon=1e-05"]
        out = _dequantize(lines, "od", _requantize(lines, "o", "%ln2", rows, 30.0), rows, 1 / 30.0)
        lines.append(f"ROOT %r = f32{rows} bitcast({out})")
    elif extra_user:
        lines.append(f"ROOT %r = (u8{rows}, u8{rows}) tuple({y}, %ar)")
    else:
        lines.append(f"ROOT %r = u8{rows} bitcast({y})")
    return head + "ENTRY %main {\n  " + "\n  ".join(lines) + "\n}\n"
