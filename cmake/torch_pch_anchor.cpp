// Empty translation unit that owns the precompiled LibTorch header (cmake/torch_pch.h).
