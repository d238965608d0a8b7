"""`python -m tools.book.execute`: run the changed notebooks into Jupyter Book's cache, one per core; then
`jupyter-book build` renders them."""

from __future__ import annotations

import logging

import yaml
from jupyter_cache import get_cache
from jupyter_cache.executors import load_executor

from tools.book.toc import ROOT, toc_notebooks


def main() -> None:
    """Run the notebooks of _toc.yml whose code is not in the cache yet, with the book's execute settings.

    A notebook that fails here is not cached, so `jupyter-book build` runs it again and reports the error.
    """
    settings = yaml.safe_load((ROOT / "_config.yml").read_text())["execute"]
    cache = get_cache(ROOT / "_build" / ".jupyter_cache")
    uris = [str(path) for path in toc_notebooks()]
    for uri in uris:
        cache.add_nb_to_project(uri)
    stale = [record.uri for record in cache.list_unexecuted(filter_uris=uris)]
    if not stale:
        return
    # The pool's workers fork from here and inherit this; where they spawn (macOS, Windows) a notebook with gpu
    # cells fails here and jupyter-book runs it.
    from tools.testing.gpu import configure_nbclient

    configure_nbclient()
    print(f"execute_book: running {len(stale)} notebooks into the cache, one per core", flush=True)
    logger = logging.getLogger("execute_book")
    logger.setLevel(logging.WARNING)  # a failed notebook is reported, the rest quietly cached
    executor = load_executor("local-parallel", cache, logger=logger)
    result = executor.run_and_cache(filter_uris=stale, timeout=settings["timeout"],
                                    allow_errors=settings["allow_errors"])
    print(f"execute_book: {len(result.succeeded)} of {len(stale)} notebooks cached; jupyter-book runs the rest")


if __name__ == "__main__":
    main()
