//! How the CLI reports what `gyr_client` could not do or understand: exit code 2 when the user's input was
//! at fault (a wrong target, a refused request), 1 otherwise; a program's text is shown with
//! its control characters made visible, never sent to the terminal.

use crate::Failure;
use crate::show::printable;
use gyr_client::ClientError;
use gyr_client::command::CommandError;

pub(crate) use gyr_client::Session;

/// A command that does not fit the grammar is the user's mistake.
impl From<CommandError> for Failure {
    fn from(e: CommandError) -> Failure {
        Failure::input(anyhow::anyhow!("{}", printable(&e.to_string())))
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Failure {
        let user = e.is_user_error();
        let error = anyhow::anyhow!("{}", printable(&e.to_string()));
        if user {
            Failure::input(error)
        } else {
            Failure::from(error)
        }
    }
}
