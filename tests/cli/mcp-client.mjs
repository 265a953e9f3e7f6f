// SPDX-License-Identifier: MIT
// The official MCP TypeScript SDK as the client of `forklet --socket SOCK mcp` over stdio,
// against a real forkletd and microVM (run by tests/integration/mcp-sdk.sh).
// Usage: node mcp-client.mjs FORKLET SOCKET SESSION
// Lists the tools, runs uname -s, writes and reads a file, checkpoints, forks once (and runs a
// command in the fork), pauses and resumes, deletes the checkpoint (refused while its fork is
// there, then with it), snapshots the workspace, restores it into a new session and deletes
// the snapshot once that session is gone, and checks the errors (a missing session, an unknown
// tool, bad arguments). Prints "ok: ..." per step; exits 1 at the first failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const [forklet, socket, session] = process.argv.slice(2);
if (!forklet || !socket || !session) {
        console.error('usage: node mcp-client.mjs FORKLET SOCKET SESSION');
        process.exit(2);
}
const LONG = { timeout: 300000 }; // a fork under TCG can take minutes on a loaded machine

function check(cond, what) {
        if (!cond)
                throw new Error(what);
}

const text = (res) => res.content?.[0]?.text ?? '';

async function call(client, name, args, options) {
        const res = await client.callTool({ name, arguments: args }, undefined, options);
        check(!res.isError, `${name}: tool error: ${text(res)}`);
        check(res.structuredContent && typeof res.structuredContent === 'object',
              `${name}: no structuredContent`);
        check(JSON.stringify(JSON.parse(text(res))) === JSON.stringify(res.structuredContent),
              `${name}: the text content is not the structured content`);
        return res.structuredContent;
}

async function toolError(client, name, args) {
        const res = await client.callTool({ name, arguments: args });
        check(res.isError === true, `${name}: expected isError, got ${JSON.stringify(res)}`);
        return text(res);
}

async function rpcError(client, name, args) {
        try {
                await client.callTool({ name, arguments: args });
        } catch (e) {
                return e;
        }
        throw new Error(`${name}: expected a JSON-RPC error`);
}

async function main() {
        const transport = new StdioClientTransport({
                command: forklet,
                args: ['--socket', socket, 'mcp'],
                stderr: 'inherit',
        });
        const client = new Client({ name: 'forklet-mcp-test', version: '1.0.0' });
        await client.connect(transport);
        check(client.getServerVersion()?.name === 'forklet', 'serverInfo.name is not forklet');
        check(client.getServerCapabilities()?.tools, 'no tools capability');
        console.log(`ok: initialize (server ${JSON.stringify(client.getServerVersion())})`);

        const want = ['list_sessions', 'describe_session', 'create_session', 'delete_session',
                      'exec', 'read_file', 'write_file', 'checkpoint_create', 'checkpoint_list',
                      'checkpoint_delete', 'snapshot_create', 'snapshot_list', 'snapshot_delete',
                      'restore', 'fork', 'rollback', 'pause', 'resume'];
        const { tools } = await client.listTools();
        const names = tools.map((t) => t.name);
        check(JSON.stringify([...names].sort()) === JSON.stringify([...want].sort()),
              `tools/list names: ${names}`);
        for (const t of tools) {
                check(t.inputSchema?.type === 'object', `${t.name}: inputSchema is not an object`);
                check(t.description, `${t.name}: no description`);
        }
        const exec = tools.find((t) => t.name === 'exec');
        check(exec.inputSchema.properties.argv?.type === 'array' &&
                      exec.inputSchema.required.includes('argv'),
              'exec: argv is not a required array');
        console.log(`ok: tools/list (${names.length} tools with input schemas)`);

        const listed = await call(client, 'list_sessions', {});
        check(listed.sessions.some((s) => s.name === session && s.phase === 'Running'),
              `list_sessions: ${session} not Running: ${JSON.stringify(listed)}`);

        const un = await call(client, 'exec', { session, argv: ['uname', '-s'] });
        check(un.stdout.trim() === 'Linux', `exec uname -s: stdout ${JSON.stringify(un.stdout)}`);
        check(un.exit_code === 0, `exec uname -s: exit code ${un.exit_code}`);
        const sh = await call(client, 'exec', {
                session, argv: ['sh', '-c', 'read x; echo "got $x"; echo oops >&2; exit 7'],
                stdin: 'hello\n', timeout_seconds: 60,
        });
        check(sh.stdout === 'got hello\n' && sh.stderr === 'oops\n' && sh.exit_code === 7,
              `exec sh: ${JSON.stringify(sh)}`);
        console.log('ok: exec (uname -s: Linux; stdin, stderr and exit code 7)');

        const body = `written through MCP ${Date.now()}\n`;
        await call(client, 'write_file', { session, path: '/tmp/mcp.txt', content: body });
        const back = await call(client, 'read_file', { session, path: '/tmp/mcp.txt' });
        check(back.content === body, `read_file: ${JSON.stringify(back)}`);
        const cat = await call(client, 'exec', { session, argv: ['cat', '/tmp/mcp.txt'] });
        check(cat.stdout === body, `cat after write_file: ${JSON.stringify(cat.stdout)}`);
        console.log('ok: write_file, read_file');

        const ck = await call(client, 'checkpoint_create', { session }, LONG);
        check(/^ck_[0-9a-f]+$/.test(ck.id), `checkpoint_create: id ${ck.id}`);
        const cks = await call(client, 'checkpoint_list', { session });
        check(cks.checkpoints.some((c) => c.id === ck.id), `checkpoint_list lacks ${ck.id}`);
        console.log(`ok: checkpoint_create ${ck.id}, checkpoint_list`);

        const t0 = Date.now();
        const fk = await call(client, 'fork',
                              { session, checkpoint: ck.id, count: 1, wait_seconds: 240 }, LONG);
        check(fk.names.length === 1 && fk.names[0] === `${session}-fork-0`,
              `fork names: ${fk.names}`);
        check(fk.running === true, `fork: not Running: ${JSON.stringify(fk)}`);
        const child = fk.names[0];
        const d = await call(client, 'describe_session', { session: child });
        check(d.status.phase === 'Running', `describe_session ${child}: ${d.status.phase}`);
        check(d.status.forkOf?.session === session && d.status.forkOf?.checkpoint === ck.id,
              `describe_session ${child}: forkOf ${JSON.stringify(d.status.forkOf)}`);
        const inFork = await call(client, 'exec', { session: child, argv: ['cat', '/tmp/mcp.txt'] });
        check(inFork.stdout === body, `the fork lacks the checkpoint's file: ${inFork.stdout}`);
        console.log(`ok: fork 1 -> ${child} Running in ${Date.now() - t0} ms, has the file`);

        const paused = await call(client, 'pause', { session: child, wait_seconds: 120 }, LONG);
        check(paused.phase === 'Paused', `pause: ${JSON.stringify(paused)}`);
        const resumed = await call(client, 'resume', { session: child, wait_seconds: 120 }, LONG);
        check(resumed.phase === 'Running', `resume: ${JSON.stringify(resumed)}`);
        console.log('ok: pause, resume');

        // the checkpoint goes: not while its fork is there, then with it (cascade)
        let refused = await toolError(client, 'checkpoint_delete', { session, checkpoint: ck.id });
        check(refused.includes(child) && refused.includes('HTTP 409'),
              `checkpoint_delete with a fork: ${refused}`);
        const del = await call(client, 'checkpoint_delete',
                               { session, checkpoint: ck.id, cascade: true }, LONG);
        check(del.result === 'deleted', `checkpoint_delete: ${JSON.stringify(del)}`);
        const left = await call(client, 'checkpoint_list', { session });
        check(!left.checkpoints.some((c) => c.id === ck.id), `${ck.id} still listed`);
        const again = await call(client, 'checkpoint_delete', { session, checkpoint: ck.id });
        check(again.result === 'already gone', `checkpoint_delete again: ${JSON.stringify(again)}`);
        console.log(`ok: checkpoint_delete (refused: "${refused}"; cascade; then already gone)`);

        // a snapshot of the workspace, a session restored from it, and its delete once that
        // session is gone (refused before)
        await call(client, 'write_file',
                   { session, path: '/workspace/mcp-snap.txt', content: body });
        const snap = await call(client, 'snapshot_create', { session }, LONG);
        check(/^snap_[0-9a-f]+$/.test(snap.id), `snapshot_create: id ${snap.id}`);
        const restored = `${session}-restored`;
        const rs = await call(client, 'restore',
                              { snapshot: snap.id, name: restored, wait_seconds: 240 }, LONG);
        check(rs.running === true, `restore: not Running: ${JSON.stringify(rs)}`);
        const inRestored = await call(client, 'read_file',
                                      { session: restored, path: '/workspace/mcp-snap.txt' });
        check(inRestored.content === body, `the restored session lacks the file: ${inRestored.content}`);
        const snaps = await call(client, 'snapshot_list', {});
        const s0 = snaps.snapshots.find((x) => x.id === snap.id);
        check(s0 && s0.session === session && s0.usedBy.includes(`default/${restored}`),
              `snapshot_list: ${JSON.stringify(snaps)}`);
        const inUse = await toolError(client, 'snapshot_delete', { snapshot: snap.id });
        check(inUse.includes(`default/${restored}`) && inUse.includes('HTTP 409'),
              `snapshot_delete while restored: ${inUse}`);
        await call(client, 'delete_session', { session: restored });
        let gone = null;
        for (let i = 0; i < 120 && !gone; i++) {
                const res = await client.callTool({ name: 'snapshot_delete',
                                                    arguments: { snapshot: snap.id } });
                if (!res.isError)
                        gone = res.structuredContent;
                else
                        await new Promise((r) => setTimeout(r, 500));
        }
        check(gone?.result === 'deleted', `snapshot_delete after the session's delete: ${JSON.stringify(gone)}`);
        console.log(`ok: snapshot_create ${snap.id}, restore -> ${restored} Running with the file, ` +
                    `snapshot_list, snapshot_delete (refused: "${inUse}"; then deleted)`);

        let msg = await toolError(client, 'exec', { session: 'nope-missing', argv: ['true'] });
        check(msg.includes('session default/nope-missing not found') && msg.includes('HTTP 404'),
              `exec on a missing session: ${msg}`);
        msg = await toolError(client, 'describe_session', { session: 'nope-missing' });
        check(msg.includes('not found'), `describe_session of a missing session: ${msg}`);
        let e = await rpcError(client, 'frobnicate', {});
        check(e.code === -32602 && /unknown tool/.test(e.message), `unknown tool: ${e}`);
        e = await rpcError(client, 'exec', { session, argv: 'uname' });
        check(e.code === -32602 && /argv/.test(e.message), `bad arguments: ${e}`);
        console.log(`ok: errors (isError: "${msg}"; -32602 for an unknown tool, bad arguments)`);

        await client.close();
}

main().then(
        () => process.exit(0),
        (e) => {
                console.error(`FAIL: ${e.message ?? e}`);
                process.exit(1);
        });
