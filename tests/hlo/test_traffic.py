from mlcc.hlo.parser import parse_module
from mlcc.hlo.traffic import kernel_bytes


def test_a_gather_reads_only_the_rows_it_gathers_and_a_repeated_operand_is_read_once():
    m = parse_module("""
      %f {
        %t = f32[1000,64]{1,0} parameter(0)
        %i = s64[16]{0} parameter(1)
        ROOT %g = f32[16,64]{1,0} gather(%t, %i), axis=0
      }

      ENTRY %main {
        %table = f32[1000,64]{1,0} parameter(0)
        %ids = s64[16]{0} parameter(1)
        %g = f32[16,64]{1,0} gather(%table, %ids), axis=0
        %fg = f32[16,64]{1,0} fusion(%table, %ids), calls=%f, kind=loop
        ROOT %a = f32[16,64]{1,0} add(%g, %g)
      }""")
    insts = {i.name: i for i in m.entry.instructions}
    assert kernel_bytes(insts["g"], m.symbols) == (16 * 64 * 4 + 16 * 8, 16 * 64 * 4)
    assert kernel_bytes(insts["fg"], m.symbols) == (16 * 64 * 4 + 16 * 8, 16 * 64 * 4)
    assert kernel_bytes(insts["a"], m.symbols) == (16 * 64 * 4, 16 * 64 * 4)


def test_a_multi_output_fusion_writes_every_result():
    m = parse_module("""
      %f {
        %p = f32[15,8]{1,0} parameter(0)
        %n = f32[1,8]{1,0} parameter(1)
        %c = f32[16,8]{1,0} concatenate(%p, %n), dimension=0
        %e = f32[16,8]{1,0} exp(%c)
        ROOT %t = (f32[16,8]{1,0}, f32[16,8]{1,0}) tuple(%e, %c)
      }

      ENTRY %main {
        %past = f32[15,8]{1,0} parameter(0)
        %new = f32[1,8]{1,0} parameter(1)
        %fused = (f32[16,8]{1,0}, f32[16,8]{1,0}) fusion(%past, %new), calls=%f, kind=loop
        %e = f32[16,8]{1,0} get-tuple-element(%fused), index=0
        %c = f32[16,8]{1,0} get-tuple-element(%fused), index=1
        ROOT %r = (f32[16,8]{1,0}, f32[16,8]{1,0}) tuple(%e, %c)
      }""")
    fused = next(i for i in m.entry.instructions if i.name == "fused")
    assert kernel_bytes(fused, m.symbols) == (16 * 8 * 4, 2 * 16 * 8 * 4)
