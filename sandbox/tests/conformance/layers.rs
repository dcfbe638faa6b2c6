//! What environments stand on, on the namespace backend: a sandbox's own
//! home, a working copy layered over read-only layers the sandbox user
//! owns (handed over without a walk, only the writable layer given back),
//! and the one door a setup phase gets: a listener on the sandbox's own
//! loopback that the host accepts on, with no other network.

use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

use forgehand_sandbox::layers::Overlay;
use forgehand_sandbox::{Backend, ExecRequest, Handover, SandboxSpec};

use crate::support;

fn ours() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn dir(parent: &Path, name: &str) -> std::path::PathBuf {
    let path = parent.join(name);
    std::fs::create_dir_all(&path).unwrap();
    path
}

async fn run(sandbox: &dyn forgehand_sandbox::Sandbox, script: &str) -> String {
    let out = sandbox.exec(ExecRequest::shell(script)).await.unwrap();
    assert!(
        out.status.success(),
        "{script}: {}\n{}{}",
        out.status,
        out.stdout.to_text(),
        out.stderr.to_text()
    );
    out.stdout.to_text()
}

/// A home of its own: HOME points there, what is written there stays on
/// the host after the sandbox, and goes back to the host's user.
pub async fn a_home_of_its_own_is_kept(backend: Arc<dyn Backend>) {
    support::require_usable(&*backend).await;
    let tmp = tempfile::tempdir().unwrap();
    let (workspace, home) = (dir(tmp.path(), "ws"), dir(tmp.path(), "home"));
    let mut spec = support::spec(&workspace, support::limits());
    spec.home = Some(home.clone());
    let sandbox = backend.create(spec).await.unwrap();
    let said = run(
        &*sandbox,
        "echo \"$HOME\"; mkdir -p ~/.cache && echo kept > ~/.cache/x; cat ~/.cache/x",
    )
    .await;
    assert_eq!(said, "/home/agent\nkept\n");
    sandbox.destroy().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(home.join(".cache/x")).unwrap(),
        "kept\n"
    );
    assert_eq!(
        std::fs::metadata(home.join(".cache/x")).unwrap().uid(),
        ours()
    );
}

/// A layered working copy: the lower layers are the sandbox user's
/// already (nothing is walked on the way in), writes land in the upper
/// layer, the lowers are never changed, and only the upper goes back.
pub async fn a_layered_working_copy_writes_only_its_upper_layer(backend: Arc<dyn Backend>) {
    support::require_usable(&*backend).await;
    let tmp = tempfile::tempdir().unwrap();
    let base = dir(tmp.path(), "base");
    std::fs::write(base.join("a.txt"), "base\n").unwrap();
    std::fs::write(base.join("b.txt"), "base\n").unwrap();
    let env = dir(tmp.path(), "env");
    dir(&env, "node_modules/left-pad");
    std::fs::write(env.join("node_modules/left-pad/index.js"), "env\n").unwrap();
    let (upper, work, merged) = (
        dir(tmp.path(), "upper"),
        dir(tmp.path(), "work"),
        dir(tmp.path(), "merged"),
    );
    for layer in [&base, &env, &upper] {
        backend.prepare_for_sandbox(layer).await.unwrap();
    }
    let overlay = Overlay::writable(&[&env, &base], &upper, &work, &merged).unwrap();
    let spec = SandboxSpec {
        handover: Handover::Prepared {
            give_back: vec![upper.clone()],
        },
        ..support::spec(overlay.path(), support::limits())
    };
    let sandbox = backend.create(spec).await.unwrap();
    let said = run(
        &*sandbox,
        "cat /workspace/node_modules/left-pad/index.js; echo agent > /workspace/a.txt; rm /workspace/b.txt; echo new > /workspace/new.txt; ls /workspace",
    )
    .await;
    assert_eq!(said, "env\na.txt\nnew.txt\nnode_modules\n");
    sandbox.destroy().await.unwrap();
    assert_eq!(
        std::fs::read_to_string(base.join("a.txt")).unwrap(),
        "base\n",
        "the lower is never changed"
    );
    assert!(base.join("b.txt").exists());
    assert_eq!(
        std::fs::read_to_string(upper.join("a.txt")).unwrap(),
        "agent\n"
    );
    for changed in ["a.txt", "new.txt"] {
        assert_eq!(
            std::fs::metadata(upper.join(changed)).unwrap().uid(),
            ours(),
            "{changed} given back"
        );
    }
    drop(overlay);
}

/// The door: the host accepts what a command in the sandbox sends to
/// 127.0.0.1:port; nothing else of the network appears.
pub async fn the_door_reaches_the_host_listener_and_nothing_else(backend: Arc<dyn Backend>) {
    support::require_usable(&*backend).await;
    let tmp = tempfile::tempdir().unwrap();
    let sandbox = backend
        .create(support::spec(tmp.path(), support::limits()))
        .await
        .unwrap();
    let listener = sandbox.listen_inside(3128).await.unwrap();
    listener.set_nonblocking(false).unwrap();
    let served = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = [0u8; 256];
        let n = stream.read(&mut request).unwrap();
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nconnection: close\r\n\r\nhello\n")
            .unwrap();
        String::from_utf8_lossy(&request[..n]).into_owned()
    });
    let said = run(
        &*sandbox,
        "curl -sS --max-time 5 http://127.0.0.1:3128/from-inside; ip -o route | wc -l",
    )
    .await;
    assert_eq!(
        said, "hello\n0\n",
        "the listener answered, and still no route"
    );
    let request = served.join().unwrap();
    assert!(
        request.starts_with("GET /from-inside HTTP/1.1"),
        "{request}"
    );
    // The host's own loopback is not the sandbox's: nothing is listening
    // on this port there.
    assert!(std::net::TcpStream::connect(("127.0.0.1", 3128)).is_err());
    sandbox.destroy().await.unwrap();
}
