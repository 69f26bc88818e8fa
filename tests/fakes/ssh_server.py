"""A real SSH server on loopback (asyncssh, in-process, in its own thread) that runs commands in a shell.

Each server stands for one "host": its own host key, and an environment (PATH, PYTHONPATH, ...) for the
commands it runs, so several servers on different ports look like different machines. Clients
authenticate with a key listed in authorized_keys, as with OpenSSH.
"""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import asyncssh


class LoopThread:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="test-sshd")
        self.thread.start()

    def call(self, coro, timeout=30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class SSHServer:
    def __init__(self, loop: LoopThread, *, authorized_keys: Path, env: dict[str, str] | None = None,
                 delay: float = 0.0):
        self.loop = loop
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.env = dict(os.environ, **(env or {}))
        self.delay = delay
        self.commands: list[str] = []
        async def start():
            return await asyncssh.create_server(
                asyncssh.SSHServer, "127.0.0.1", 0, server_host_keys=[self.host_key],
                authorized_client_keys=str(authorized_keys), process_factory=self._handle, encoding=None)

        self._server = loop.call(start())
        self.port = self._server.sockets[0].getsockname()[1]

    def known_hosts_line(self) -> str:
        return f"[127.0.0.1]:{self.port} " + self.host_key.export_public_key().decode().strip() + "\n"

    async def _handle(self, process: asyncssh.SSHServerProcess) -> None:
        command = process.command or ""
        self.commands.append(command)
        data = await process.stdin.read()
        if self.delay:
            await asyncio.sleep(self.delay)
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, env=self.env)
        out, err = await proc.communicate(data)
        process.stdout.write(out)
        process.stderr.write(err)
        process.exit(proc.returncode if proc.returncode >= 0 else 255)

    def close(self) -> None:
        async def _close():
            self._server.close()
            await self._server.wait_closed()

        try:
            self.loop.call(_close(), timeout=10)
        except Exception:
            pass


def client_home(home: Path) -> Path:
    """A HOME with ~/.ssh/id_ed25519 (+ .pub) and an empty known_hosts; returns authorized_keys to give servers."""
    ssh = home / ".ssh"
    ssh.mkdir(parents=True, exist_ok=True)
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(ssh / "id_ed25519"))
    key.write_public_key(str(ssh / "id_ed25519.pub"))
    os.chmod(ssh / "id_ed25519", 0o600)
    (ssh / "known_hosts").write_text("")
    auth = home / "authorized_keys"
    auth.write_bytes(key.export_public_key())
    return auth
