use queue_core::prelude::*;

#[derive(Serialize, Deserialize)]
pub struct WelcomeEmail {
    pub to: String,
}

#[derive(Serialize, Deserialize)]
pub struct Digest {
    pub week: u32,
}

#[job_queue("email")]
pub enum Email {
    #[job("welcome", output = bool)]
    Welcome(WelcomeEmail),
    #[job("digest")]
    Digest(Digest),
}

pub struct Mailer;

#[processor(Email, concurrency = 2)]
async fn send_welcome(job: Job<WelcomeEmail>, _mailer: Dep<Mailer>) -> Result<bool, JobError> {
    Ok(!job.data.to.is_empty())
}

#[derive(Default)]
pub struct Digests;

#[processor(Email)]
impl Digests {
    #[job]
    async fn digest(&self, job: Job<Digest>) -> Result<(), JobError> {
        let _ = job.data.week;
        Ok(())
    }
}

#[inject_queue]
pub struct Signup {
    email: Queue<Email>,
}

#[on_worker_event(Email, failed)]
async fn alert(event: WorkerEvent, _mailer: Dep<Mailer>) {
    let _ = event;
}

async fn explicit(app: QueueApp) -> queue_core::Result<()> {
    let _ = Processor::of::<Email>().handle(send_welcome);
    app.add_job(WelcomeEmail { to: "a@b.c".into() }, JobOptions::new()).await?;
    let signup = Signup::from_app(&app)?;
    signup.email.add_job(Digest { week: 1 }, JobOptions::new()).await?;
    let _: Email = Digest { week: 2 }.into();
    Ok(())
}

fn main() {
    let _ = explicit;
}
