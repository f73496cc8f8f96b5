"""An AIStore emulator driven through the real ``aistore`` SDK in tests.

See :class:`tests.emulators.ais.server.AisEmulator` and the pytest fixture factory in
:mod:`tests.emulators.ais.fixtures`. The object store API (for tests and the dSort module) is
documented in :mod:`tests.emulators.ais.store`.
"""
