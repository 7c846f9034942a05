"""The library's folders as layers: which folder may use which (docs/architecture.md#layers).

One table, read twice: by the BUILD files, whose visibility (layer_users) lets only the
folders above a folder depend on it, and by //transport:layering_test
(transport/layering_test.py), which fails naming the line where a source file includes
a header of a folder it may not use. Using is transitive: a folder may use what the folders it names may use. A
folder's own tests are held to the same rule, except that a test may include the test
harness of tests/.
"""

# Each folder of the library, bottom first, with the folders it uses directly.
LAYERS = [
    ["base", []],
    ["elementwise", ["base"]],  # element-wise math, Reducer
    ["topology", ["base"]],
    ["bootstrap", ["topology"]],
    ["device", ["elementwise"]],  # DeviceEngine
    ["transport", ["device", "topology"]],
    ["cuda", ["device"]],
    ["collectives", ["transport"]],
    ["diagnosis", ["transport"]],
    ["metrics", ["diagnosis"]],  # the metrics server (HTTP)
    # The public header (include/tessera) is what comm/ implements.
    ["comm", ["bootstrap", "collectives", "cuda", "diagnosis", "include", "metrics"]],
]

# Above the library, each using what it needs of it: the public API's users, the
# programs, the tests. Besides comm/ (through //:tessera), they use these folders:
APPLICATION_USES = {
    "bench": ["elementwise"],
    "mpi": [],  # libtessera_mpi.so: Open MPI's collectives on the public API only
    "nccl": ["comm"],
    "simulator": ["base", "collectives", "topology", "transport"],
    "tests": [layer[0] for layer in LAYERS],
    "tools": ["base", "topology"],
    "trainer": ["base"],
}

def uses_of_layers():
    """Each folder of LAYERS -> the folders it may use: its own, those it names, and
    what those may use (LAYERS lists the used before the users)."""
    closure = {}
    for layer in LAYERS:
        allowed = {layer[0]: True}
        for used in layer[1]:
            allowed[used] = True
            for f in closure.get(used, []):
                allowed[f] = True
        closure[layer[0]] = sorted(allowed.keys())
    return closure

def layer_users(folder):
    """The visibility of `folder`'s libraries: the folder itself (its subfolders
    included), the folders of the library that may use it, the root package (the
    shared libraries) and the applications that use it."""
    users = ["//:__pkg__", "//%s:__subpackages__" % folder]
    closure = uses_of_layers()
    for layer in LAYERS:
        if layer[0] != folder and folder in closure[layer[0]]:
            users.append("//%s:__subpackages__" % layer[0])
    for app in sorted(APPLICATION_USES.keys()):
        if folder in APPLICATION_USES[app]:
            users.append("//%s:__subpackages__" % app)
    return users

# The sources the layering test reads: every folder of the library and every application.
LAYERING_SOURCES = ["//%s:sources" % layer[0] for layer in LAYERS] + [
    "//%s:sources" % app
    for app in ["bench", "mpi", "nccl", "pytorch", "simulator", "tools", "trainer"]
]
