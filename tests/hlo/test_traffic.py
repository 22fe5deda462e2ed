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
