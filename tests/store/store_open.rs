//! Many openers of one new database at once (the daemon starting while an operator runs
//! `status`): every one succeeds, and the schema is created once.

use dnssec_warden::store::Store;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_opens_all_succeed() {
    for _ in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let opens = (0..8).map(|_| {
            let path = path.clone();
            tokio::spawn(async move { Store::open(&path).await.map(|_| ()) })
        });
        for result in futures::future::join_all(opens).await {
            result.unwrap().unwrap();
        }
        let store = Store::open(&path).await.unwrap();
        assert!(store.zones().await.unwrap().is_empty());
    }
}
