"""sh_test over the trainer binary and the tiny model's config."""

def trainer_sh_test(name, checker = None, **kwargs):
    """`name`.sh runs as `name`.sh TRAINER CONFIG [CHECKER].

    The script starts by sourcing trainer_test_lib.sh (its paths, scratch folder, fail
    and finish).

    Args:
      name: the test, whose script is `name`.sh.
      checker: a script the test runs on the trainer's output (its path is the third
        argument), or None.
      **kwargs: passed to sh_test (size, tags).
    """
    args = [
        "$(location //trainer:trainer)",
        "$(location //configs:gpt-tiny.textproto)",
    ]
    data = [
        ":trainer_test_lib.sh",
        "//configs:gpt-tiny.textproto",
        "//trainer:trainer",
    ]
    if checker:
        args.append("$(location %s)" % checker)
        data.append(checker)
    native.sh_test(
        name = name,
        srcs = [name + ".sh"],
        args = args,
        data = data,
        **kwargs
    )
