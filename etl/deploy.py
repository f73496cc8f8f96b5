"""Deploy the ETLs in ``etl/`` to an AIStore cluster with the ``aistore`` SDK (2.0.0).

Two ways (see ``etl/README.md``):

* :func:`deploy_class` — ``client.etl(name).init_class(...)``: the server class is
  cloudpickled **by value** (with ``etl.common``) into ``ETL_CLASS_PAYLOAD`` and AIStore's
  ``aistorage/runtime_python`` image runs it; ``dependencies`` are pip-installed in the pod.
* :func:`deploy_image` — ``client.etl(name).init(image=...)`` for an image built from the
  folder's ``Dockerfile`` (the same fields as its ``pod.yaml``).

Command line::

    python -m etl.deploy --endpoint http://ais:51080 pets [--name pets-etl] [--image REPO:TAG]
"""

from __future__ import annotations

import argparse
import importlib
import os
from typing import Any

ETLS = {
    "wds_transform": ("etl.wds_transform.server", "WdsTransform", "wds-transform"),
    "pets": ("etl.pets.server", "PetsEtl", "pets-etl"),
}
DEPENDENCIES = ["pillow"]


def deploy_class(
    client: Any, name: str, cls: type, *, obj_timeout: str = "120s", **init: Any
) -> Any:
    """``client.etl(name).init_class(dependencies=["pillow"], ...)(cls)``; returns the class.

    The modules of ``etl`` are registered with cloudpickle for pickling by value, so the pod
    does not need this repository installed.
    """
    import cloudpickle

    import etl
    import etl.common.images
    import etl.common.tarstream

    for module in (
        etl,
        etl.common.tarstream,
        etl.common.images,
        importlib.import_module(cls.__module__),
    ):
        cloudpickle.register_pickle_by_value(module)
    try:
        return client.etl(name).init_class(
            dependencies=DEPENDENCIES, obj_timeout=obj_timeout, **init
        )(cls)
    finally:
        for module in (
            etl,
            etl.common.tarstream,
            etl.common.images,
            importlib.import_module(cls.__module__),
        ):
            cloudpickle.unregister_pickle_by_value(module)


def deploy_image(client: Any, name: str, image: str, *, obj_timeout: str = "120s") -> str:
    """``client.etl(name).init(image=image, comm_type="hpush")``; returns the job id."""
    return str(client.etl(name).init(image=image, comm_type="hpush", obj_timeout=obj_timeout))


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    from aistore.sdk import Client

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("etl", choices=sorted(ETLS))
    parser.add_argument(
        "--endpoint", default=os.environ.get("AIS_ENDPOINT", "http://localhost:8080")
    )
    parser.add_argument("--name", help="ETL name (default: the folder's)")
    parser.add_argument("--image", help="deploy this image instead of init_class")
    opts = parser.parse_args(argv)
    module, cls_name, default_name = ETLS[opts.etl]
    client = Client(opts.endpoint)
    name = opts.name or default_name
    if opts.image:
        print(deploy_image(client, name, opts.image))
    else:
        deploy_class(client, name, getattr(importlib.import_module(module), cls_name))
        print(f"initialised {name}")


if __name__ == "__main__":
    main()
