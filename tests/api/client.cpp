// client.cpp: a C++ program that uses relayc through its public header
// only, linked against the shared library (tests/api/run.sh): parse and
// type-check a module, compile it for the CPU target, call it, print.
#include <cstdio>
#include <cstring>

#include "relayc/relayc.h"

int main() {
    const char *text =
        "#[version = \"0.0.5\"]\n"
        "def @main(%x: Tensor[(3), float32], %y: Tensor[(3), float32]) { add(%x, %y) }\n";
    ry_error err;
    ry_module *m = nullptr;
    if (ry_module_parse("client.relay", text, std::strlen(text), &m, &err) ||
        ry_module_typecheck(m, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    ry_vm_program *prog = nullptr;
    if (ry_vm_compile(m, ry_target_cpu(), &prog, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    int64_t shape[1] = {3};
    ry_tensor *x = ry_tensor_new(RY_FLOAT32, 1, shape), *y = ry_tensor_new(RY_FLOAT32, 1, shape);
    for (int i = 0; i < 3; i++) {
        static_cast<float *>(x->data)[i] = float(i + 1);
        static_cast<float *>(y->data)[i] = float(i + 4);
    }
    ry_value *args[2] = {ry_value_tensor(x), ry_value_tensor(y)};
    ry_value *out = nullptr;
    if (ry_vm_call(prog, "main", 2, args, nullptr, &out, &err)) {
        ry_error_print(stderr, &err);
        return 1;
    }
    const float *r = static_cast<const float *>(out->tensor->data);
    std::printf("relayc %s: [%g, %g, %g]\n", ry_version(), r[0], r[1], r[2]);
    ry_value_release(out);
    ry_value_release(args[0]);
    ry_value_release(args[1]);
    ry_vm_free(prog);
    ry_module_free(m);
    return 0;
}
