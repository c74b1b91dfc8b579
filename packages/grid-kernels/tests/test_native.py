import grid_kernels


def test_native_module_loads_and_reports_abi() -> None:
    assert grid_kernels.ABI_VERSION == 0
