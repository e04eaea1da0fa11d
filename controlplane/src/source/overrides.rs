//! The operator's settings (flags, environment, configuration file) that win over the data's own
//! `/<prefix>/config`. A SIGHUP reload replaces them while serving: every source holding an
//! [`Overrides`] rebuilds its snapshot with the new value, off the answer path.

use crate::skydns::ConfigPatch;
use tokio::sync::watch;

/// A source's view of the operator's settings: the value in force, and a way to wait for the
/// next one.
#[derive(Debug, Clone)]
pub struct Overrides {
    receiver: watch::Receiver<ConfigPatch>,
}

/// The reload side: each [`OverridesSender::replace`] reaches every [`Overrides`] made from it.
#[derive(Debug)]
pub struct OverridesSender {
    sender: watch::Sender<ConfigPatch>,
}

impl Overrides {
    /// Settings that a reload can replace, starting at `initial`.
    pub fn channel(initial: ConfigPatch) -> (OverridesSender, Overrides) {
        let (sender, receiver) = watch::channel(initial);
        (OverridesSender { sender }, Overrides { receiver })
    }

    /// The settings in force now.
    pub fn current(&self) -> ConfigPatch {
        self.receiver.borrow().clone()
    }

    /// Waits until a reload hands in settings (even the same ones: a reload re-reads the data
    /// too); never returns when nothing can reload them any more.
    pub async fn changed(&mut self) {
        if self.receiver.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Settings fixed for the source's lifetime: no reload reaches them.
impl From<ConfigPatch> for Overrides {
    fn from(fixed: ConfigPatch) -> Overrides {
        Overrides::channel(fixed).1
    }
}

impl OverridesSender {
    /// The settings in force now.
    pub fn current(&self) -> ConfigPatch {
        self.sender.borrow().clone()
    }

    /// Hands `settings` to every source, which rebuilds with them even when they did not change.
    pub fn replace(&self, settings: ConfigPatch) {
        self.sender.send_replace(settings);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn every_replace_wakes_the_sources_even_with_the_same_settings() {
        let (sender, mut overrides) = Overrides::channel(ConfigPatch::default());
        let mut second = overrides.clone();
        sender.replace(ConfigPatch::default());
        tokio::time::timeout(Duration::from_secs(1), overrides.changed())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(1), second.changed())
            .await
            .unwrap();
        let hostmaster = ConfigPatch {
            hostmaster: Some(skyline_dataplane::wire::Name::from_dotted("ops.example.").unwrap()),
            ..ConfigPatch::default()
        };
        sender.replace(hostmaster.clone());
        tokio::time::timeout(Duration::from_secs(1), overrides.changed())
            .await
            .unwrap();
        assert_eq!(overrides.current(), hostmaster);
    }

    #[tokio::test]
    async fn fixed_settings_never_change() {
        let mut fixed = Overrides::from(ConfigPatch::default());
        assert!(tokio::time::timeout(Duration::from_millis(50), fixed.changed())
            .await
            .is_err());
    }
}
